//! The echo workloads (bench/WORKLOADS.md): TCP echo over loopback with
//! tokio::net (Tokio's I/O driver). echo: one connection, ns per round trip;
//! echo100: 100 connections for --duration, messages per second.
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::{capped, result, Opts, CHECK_EVERY};

const ECHO_MSG: usize = 64;
const ECHO_CONNS: usize = 100;
const ECHO_BUF: usize = 4096;

fn echo_byte(c: i64, i: i64, k: usize) -> u8 {
    (i.wrapping_mul(7) + k as i64 + c * 13) as u8
}

async fn serve(mut s: TcpStream) {
    let mut buf = vec![0u8; ECHO_BUF];
    loop {
        match s.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                if s.write_all(&buf[..n]).await.is_err() {
                    return;
                }
            }
        }
    }
}

/// Binds 127.0.0.1:0 and accepts `conns` connections, a task each.
async fn listen(conns: usize) -> (std::net::SocketAddr, tokio::task::JoinHandle<()>) {
    let ln = match TcpListener::bind("127.0.0.1:0").await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("peer-tokio: echo: listen: {}", e);
            std::process::exit(1);
        }
    };
    let addr = ln.local_addr().unwrap();
    let acc = tokio::spawn(async move {
        let mut servers = Vec::with_capacity(conns);
        for _ in 0..conns {
            match ln.accept().await {
                Ok((s, _)) => {
                    let _ = s.set_nodelay(true);
                    servers.push(tokio::spawn(serve(s)));
                }
                Err(_) => break,
            }
        }
        for s in servers {
            let _ = s.await;
        }
    });
    (addr, acc)
}

async fn dial(addr: std::net::SocketAddr) -> TcpStream {
    match TcpStream::connect(addr).await {
        Ok(s) => {
            let _ = s.set_nodelay(true);
            s
        }
        Err(e) => {
            eprintln!("peer-tokio: echo: connect: {}", e);
            std::process::exit(1);
        }
    }
}

async fn round_trip(s: &mut TcpStream, c: i64, i: i64) -> bool {
    let mut msg = [0u8; ECHO_MSG];
    for (k, b) in msg.iter_mut().enumerate() {
        *b = echo_byte(c, i, k);
    }
    if s.write_all(&msg).await.is_err() {
        return false;
    }
    let mut back = [0u8; ECHO_MSG];
    if s.read_exact(&mut back).await.is_err() {
        return false;
    }
    back.iter().enumerate().all(|(k, b)| *b == echo_byte(c, i, k))
}

pub async fn echo(o: &Opts) -> i32 {
    let (addr, acc) = listen(1).await;
    let mut s = dial(addr).await;
    let mut ok = true;
    let start = Instant::now();
    let mut i = 0;
    while i < o.n && ok {
        if i % CHECK_EVERY == 0 && i > 0 && capped(o, start) {
            break;
        }
        ok = round_trip(&mut s, 0, i).await;
        i += 1;
    }
    let el = start.elapsed();
    drop(s);
    let _ = acc.await;
    eprintln!("echo: {} round trips in {:.3} s", i, el.as_secs_f64());
    result(o, el.as_nanos() as f64 / i as f64, ok)
}

pub async fn echo100(o: &Opts) -> i32 {
    let (addr, acc) = listen(ECHO_CONNS).await;
    let mut conns = Vec::with_capacity(ECHO_CONNS);
    for _ in 0..ECHO_CONNS {
        conns.push(dial(addr).await);
    }
    let stop = Arc::new(AtomicBool::new(false));
    let start = Instant::now();
    let mut clients = Vec::with_capacity(ECHO_CONNS);
    for (c, mut s) in conns.into_iter().enumerate() {
        let stop = stop.clone();
        clients.push(tokio::spawn(async move {
            let mut i = 0i64;
            let mut ok = true;
            while ok && !stop.load(Ordering::Relaxed) {
                ok = round_trip(&mut s, c as i64, i).await;
                i += 1;
            }
            (i, ok)
        }));
    }
    tokio::time::sleep(Duration::from_secs_f64(o.duration)).await;
    stop.store(true, Ordering::Relaxed);
    let mut total = 0i64;
    let mut ok = true;
    for c in clients {
        let (n, k) = c.await.unwrap_or((0, false));
        total += n;
        ok &= k;
    }
    let el = start.elapsed().as_secs_f64();
    let _ = acc.await;
    eprintln!("echo100: {} round trips on {} connections in {:.3} s", total, ECHO_CONNS, el);
    result(o, total as f64 / el, ok)
}
