//! Peer: Tokio (bench/WORKLOADS.md): pingpong, pairs, spawn, skynet, and
//! yield (current_thread runtime). A multi-thread runtime with
//! worker_threads = --threads; a channel is mpsc::channel(1).
use std::future::Future;
use std::pin::Pin;
use std::process::exit;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

mod echo;

struct Workload {
    name: &'static str,
    unit: &'static str,
    higher_is_better: u32,
    default_n: i64,
}

// Same table as bench/peers/common/peer.h.
const WORKLOADS: [Workload; 10] = [
    Workload { name: "pingpong", unit: "ns/rt", higher_is_better: 0, default_n: 1_000_000 },
    Workload { name: "spawn", unit: "ns/op", higher_is_better: 0, default_n: 1_000_000 },
    Workload { name: "skynet", unit: "ms", higher_is_better: 0, default_n: 1_000_000 },
    Workload { name: "fib", unit: "ms", higher_is_better: 0, default_n: 40 },
    Workload { name: "pairs", unit: "rt/s", higher_is_better: 1, default_n: 0 },
    Workload { name: "select", unit: "tps", higher_is_better: 1, default_n: 0 },
    Workload { name: "build", unit: "ms", higher_is_better: 0, default_n: 2000 },
    Workload { name: "yield", unit: "ns/op", higher_is_better: 0, default_n: 1_000_000 },
    Workload { name: "echo", unit: "ns/rt", higher_is_better: 0, default_n: 100_000 },
    Workload { name: "echo100", unit: "msg/s", higher_is_better: 1, default_n: 0 },
];
const SUPPORTED: [&str; 7] = ["pingpong", "pairs", "spawn", "skynet", "yield", "echo", "echo100"];
const SPAWN_BATCH: i64 = 1000;
const CHECK_EVERY: i64 = 1000;

struct Opts {
    w: &'static Workload,
    threads: usize,
    n: i64,
    duration: f64,
    have_duration: bool,
    pairs: usize,
}

fn usage() {
    eprintln!(
        "usage: peer-tokio <workload> [--threads N] [--n N] [--duration S] [--clients N] \
         [--servers N] [--pairs N] [--seed N] [--cutoff N]"
    );
    eprintln!("workloads of this peer: {}", SUPPORTED.join(" "));
}

fn bad(what: &str, val: &str, why: &str) -> ! {
    eprintln!("peer-tokio: bad argument {} '{}': {}", what, val, why);
    usage();
    exit(2);
}

fn int(opt: &str, s: &str, min: i64, max: i64) -> i64 {
    match s.parse::<i64>() {
        Err(_) => bad(opt, s, "not an integer"),
        Ok(v) if v < min || v > max => bad(opt, s, &format!("must be in [{}, {}]", min, max)),
        Ok(v) => v,
    }
}

fn parse() -> Opts {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let first = args.first().map(String::as_str).unwrap_or("");
    if first == "-h" || first == "--help" {
        usage();
        exit(0);
    }
    if first.is_empty() || first.starts_with('-') {
        bad("<workload>", first, "missing workload");
    }
    let w = match WORKLOADS.iter().find(|w| w.name == first) {
        Some(w) => w,
        None => bad("<workload>", first, "unknown workload"),
    };
    if !SUPPORTED.contains(&w.name) {
        println!("unsupported workload {}", w.name);
        exit(3);
    }
    let cpus = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let mut o = Opts { w, threads: cpus, n: w.default_n, duration: 2.0, have_duration: false, pairs: 0 };
    let mut i = 1;
    while i < args.len() {
        let a = &args[i];
        if !a.starts_with("--") {
            bad("option", a, "expected --name");
        }
        let (name, val) = match a.split_once('=') {
            Some((n, v)) => (n.to_string(), v.to_string()),
            None => {
                if i + 1 >= args.len() {
                    bad(a, "", "missing value");
                }
                i += 1;
                (a.clone(), args[i].clone())
            }
        };
        match name.as_str() {
            "--threads" => o.threads = int(&name, &val, 1, 4096) as usize,
            "--n" => o.n = int(&name, &val, 1, 1 << 62),
            "--duration" => match val.parse::<f64>() {
                Ok(d) if d > 0.0 && d <= 86400.0 => {
                    o.duration = d;
                    o.have_duration = true;
                }
                _ => bad(&name, &val, "must be seconds in (0, 86400]"),
            },
            "--clients" | "--servers" => {
                int(&name, &val, 1, 100_000);
            }
            "--pairs" => o.pairs = int(&name, &val, 1, 100_000) as usize,
            "--seed" => {
                int(&name, &val, 0, i64::MAX);
            }
            "--cutoff" => {
                int(&name, &val, 2, 60);
            }
            _ => bad("option", &name, "unknown option"),
        }
        i += 1;
    }
    if o.pairs == 0 {
        o.pairs = o.threads;
    }
    if w.name == "skynet" {
        let mut x = o.n;
        while x > 1 && x % 10 == 0 {
            x /= 10;
        }
        if x != 1 || o.n < 10 {
            bad("--n", &o.n.to_string(), "skynet leaves must be a power of 10, >= 10");
        }
    }
    o
}

/// The spawn and yield check: a count the tasks kept themselves against what
/// the workload asked; a mismatch is reported on stderr.
fn count_ok(what: &str, got: i64, want: i64) -> bool {
    if got != want {
        eprintln!("peer-tokio: {}: {}, expected {}", what, got, want);
    }
    got == want
}

fn result(o: &Opts, value: f64, ok: bool) -> i32 {
    let threads = if o.w.name == "yield" { 1 } else { o.threads };
    let prec = if value >= 100.0 { 0 } else { 2 };
    println!(
        "RESULT workload={} system=tokio value={:.*} unit={} higher_is_better={} check={} threads={}",
        o.w.name,
        prec,
        value,
        o.w.unit,
        o.w.higher_is_better,
        if ok { "ok" } else { "FAIL" },
        threads
    );
    if ok {
        0
    } else {
        1
    }
}

fn capped(o: &Opts, start: Instant) -> bool {
    o.have_duration && start.elapsed().as_secs_f64() >= o.duration
}

// ---- pingpong, pairs ---------------------------------------------------------

async fn echo_server(mut req: mpsc::Receiver<i64>, rep: mpsc::Sender<i64>) {
    while let Some(v) = req.recv().await {
        if rep.send(v + 1).await.is_err() {
            break;
        }
    }
}

async fn round_trip(req: &mpsc::Sender<i64>, rep: &mut mpsc::Receiver<i64>, i: i64) -> bool {
    req.send(i).await.is_ok() && rep.recv().await == Some(i + 1)
}

async fn pingpong(o: &Opts) -> i32 {
    let (req_tx, req_rx) = mpsc::channel(1);
    let (rep_tx, mut rep_rx) = mpsc::channel(1);
    let server = tokio::spawn(echo_server(req_rx, rep_tx));
    let mut ok = true;
    let start = Instant::now();
    let mut i = 0;
    while i < o.n {
        if i % CHECK_EVERY == 0 && i > 0 && capped(o, start) {
            break;
        }
        ok &= round_trip(&req_tx, &mut rep_rx, i).await;
        i += 1;
    }
    let el = start.elapsed();
    drop(req_tx);
    ok &= server.await.is_ok();
    eprintln!("pingpong: {} round trips in {:.3} s", i, el.as_secs_f64());
    result(o, el.as_nanos() as f64 / i as f64, ok)
}

async fn pairs(o: &Opts) -> i32 {
    let stop = Arc::new(AtomicBool::new(false));
    let start = Instant::now();
    let mut clients = Vec::new();
    for _ in 0..o.pairs {
        let (req_tx, req_rx) = mpsc::channel(1);
        let (rep_tx, mut rep_rx) = mpsc::channel(1);
        tokio::spawn(echo_server(req_rx, rep_tx));
        let stop = stop.clone();
        clients.push(tokio::spawn(async move {
            let (mut i, mut ok) = (0i64, true);
            while !stop.load(Ordering::Relaxed) {
                ok &= round_trip(&req_tx, &mut rep_rx, i).await;
                i += 1;
            }
            (i, ok)
        }));
    }
    tokio::time::sleep(Duration::from_secs_f64(o.duration)).await;
    stop.store(true, Ordering::Relaxed);
    let (mut total, mut ok) = (0i64, true);
    for c in clients {
        match c.await {
            Ok((n, k)) => {
                total += n;
                ok &= k;
            }
            Err(_) => ok = false,
        }
    }
    let el = start.elapsed().as_secs_f64();
    eprintln!("pairs: {} pairs, {} round trips in {:.3} s", o.pairs, total, el);
    result(o, total as f64 / el, ok)
}

// ---- spawn, skynet --------------------------------------------------------------

async fn spawn(o: &Opts) -> i32 {
    let start = Instant::now();
    let mut done = 0i64;
    let mut ok = true;
    let ran = Arc::new(AtomicI64::new(0)); // task bodies that ran
    let mut handles = Vec::with_capacity(SPAWN_BATCH as usize);
    while done < o.n && !(done > 0 && capped(o, start)) {
        let batch = (o.n - done).min(SPAWN_BATCH);
        for _ in 0..batch {
            let ran = ran.clone();
            handles.push(tokio::spawn(async move {
                ran.fetch_add(1, Ordering::Relaxed);
            }));
        }
        for h in handles.drain(..) {
            ok &= h.await.is_ok();
        }
        done += batch;
    }
    let el = start.elapsed();
    eprintln!("spawn: {} tasks in {:.3} s", done, el.as_secs_f64());
    ok &= count_ok("spawn: tasks that ran", ran.load(Ordering::Relaxed), done);
    result(o, el.as_nanos() as f64 / done as f64, ok)
}

fn skynet(num: i64, size: i64) -> Pin<Box<dyn Future<Output = i64> + Send>> {
    Box::pin(async move {
        if size == 1 {
            return num;
        }
        let sub = size / 10;
        let children: Vec<_> = (0..10).map(|i| tokio::spawn(skynet(num + i * sub, sub))).collect();
        let mut sum = 0;
        for c in children {
            sum += c.await.unwrap_or(0);
        }
        sum
    })
}

async fn run_skynet(o: &Opts) -> i32 {
    let start = Instant::now();
    let sum = tokio::spawn(skynet(0, o.n)).await.unwrap_or(0);
    let el = start.elapsed();
    eprintln!("skynet: {} leaves, sum {}", o.n, sum);
    result(o, el.as_secs_f64() * 1e3, sum == o.n * (o.n - 1) / 2)
}

// ---- yield: two tasks on a current_thread runtime ---------------------------------

async fn run_yield(o: &Opts) -> i32 {
    let n = o.n;
    let start = Instant::now();
    let tasks: Vec<_> = (0..2)
        .map(|_| {
            tokio::spawn(async move {
                let mut count = 0i64; // yields made
                for _ in 0..n {
                    tokio::task::yield_now().await;
                    count += 1;
                }
                count
            })
        })
        .collect();
    let mut ok = true;
    for (k, t) in tasks.into_iter().enumerate() {
        let what = if k == 0 { "yield: first task's yields" } else { "yield: second task's yields" };
        ok &= count_ok(what, t.await.unwrap_or(-1), n);
    }
    let el = start.elapsed();
    result(o, el.as_nanos() as f64 / (2 * n) as f64, ok)
}

fn main() {
    // 'static, so that the workload itself runs as a task on a worker thread
    // (block_on would run it on the main thread, outside the worker pool).
    let o: &'static Opts = Box::leak(Box::new(parse()));
    let rt = if o.w.name == "yield" {
        tokio::runtime::Builder::new_current_thread().enable_all().build()
    } else {
        tokio::runtime::Builder::new_multi_thread().worker_threads(o.threads).enable_all().build()
    };
    let rt = match rt {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("peer-tokio: cannot build the runtime: {}", e);
            exit(1);
        }
    };
    let rc = rt.block_on(async {
        tokio::spawn(async move {
            match o.w.name {
                "pingpong" => pingpong(o).await,
                "pairs" => pairs(o).await,
                "spawn" => spawn(o).await,
                "skynet" => run_skynet(o).await,
                "echo" => echo::echo(o).await,
                "echo100" => echo::echo100(o).await,
                _ => run_yield(o).await,
            }
        })
        .await
        .unwrap_or(1)
    });
    exit(rc);
}
