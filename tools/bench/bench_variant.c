/*
 * usched bench: the variants compared (harness.h): the usched variants of
 * --compare, --policy or every policy, each checked before any run (a
 * setting the library refuses is a usage error), and the peer systems of
 * --peers.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_peer.h"
#include "harness.h"

#define usage_error(...) bench_usage_error(B.e, "bench", __VA_ARGS__)

const char *bench_variant_policy(const struct variant *v)
{
    const char *env = getenv("USCHED_POLICY");
    return v->set.policy[0] ? v->set.policy : env && *env ? env : "usched";
}

int bench_variant_apply(usched_t *s, const struct variant *v, char *err, size_t len)
{
    const struct {
        const char *key, *val;
        bool set;
    } kv[] = {
        {"policy", v->set.policy, v->set.policy[0] != '\0'},
        {"topology", v->set.topology, v->set.has_topology},
        {"cpus", v->set.cpus, v->set.has_cpus},
        {"knobs", v->set.knobs, v->set.knobs[0] != '\0'},
        {"emulate", "1", v->set.emulate},
        {"pin", v->set.pin, v->set.pin[0] != '\0'},
    };
    for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++) {
        if (!kv[i].set) continue;
        if (usched_set(s, kv[i].key, kv[i].val) < 0) {
            /* A long value may not fit: end the message with "..." then. */
            if (snprintf(err, len, "%s '%s': %s", kv[i].key, kv[i].val, usched_last_error()) >=
                    (int)len &&
                len > 4)
                memcpy(err + len - 4, "...", 4);
            return -1;
        }
    }
    return 0;
}

/* Checks a variant's settings without running it: bad ones are a usage
 * error (2), the message prefixed by what (NULL: none). */
static int variant_check(struct variant *v, const char *what)
{
    usched_t *s;
    char err[400];
    if (usched_create(&s) < 0) return usage_error("environment: %s", usched_last_error());
    int r = bench_variant_apply(s, v, err, sizeof err);
    usched_destroy(s);
    if (r < 0) {
        return usage_error("%s%s%s", what ? what : "", what ? ": " : "", err);
    }
    if (v->set.has_topology || v->set.has_cpus) {
        FILE *null = fopen("/dev/null", "w");
        r = null ? usched_topo_print(null, v->set.has_topology ? v->set.topology : NULL,
                                     v->set.has_cpus ? v->set.cpus : NULL, "json")
                 : 0;
        if (null) fclose(null);
        if (r < 0)
            return usage_error("%s%stopology: %s", what ? what : "", what ? ": " : "", usched_last_error());
    }
    return 0;
}

static struct variant *variant_add(const struct variant *base)
{
    struct variant *nv = realloc(B.v, (size_t)(B.nv + 1) * sizeof *nv);
    if (!nv) {
        fputs("usched bench: out of memory\n", stderr);
        exit(1);
    }
    B.v = nv;
    B.v[B.nv] = *base;
    return &B.v[B.nv++];
}

/* Applies one "key=value" of a --compare variant. */
static int variant_setting(struct variant *v, const char *key, const char *val, const char *spec)
{
    if (!*key || !val) return usage_error("--compare '%s': '%s' is not key=value", spec, key);
    if (!strcmp(key, "policy"))
        snprintf(v->set.policy, sizeof v->set.policy, "%s", val);
    else if (!strcmp(key, "topology")) {
        snprintf(v->set.topology, sizeof v->set.topology, "%s", val);
        v->set.has_topology = true;
    } else if (!strcmp(key, "cpus")) {
        snprintf(v->set.cpus, sizeof v->set.cpus, "%s", val);
        v->set.has_cpus = true;
    } else if (!strcmp(key, "knobs"))
        bench_settings_append(v->set.knobs, sizeof v->set.knobs, ",", val);
    else if (!strcmp(key, "fresh")) {
        if (strcmp(val, "0") && strcmp(val, "1"))
            return usage_error("--compare '%s': fresh '%s': must be 0 or 1", spec, val);
        v->set.fresh = val[0] == '1';
    } else if (!strcmp(key, "pin")) {
        if (strcmp(val, "0") && strcmp(val, "1"))
            return usage_error("--compare '%s': pin '%s': must be 0 or 1", spec, val);
        snprintf(v->set.pin, sizeof v->set.pin, "%s", val);
    } else {
        char kv[300];
        snprintf(kv, sizeof kv, "%s=%s", key, val);
        bench_settings_append(v->set.knobs, sizeof v->set.knobs, ",", kv);
    }
    return 0;
}

/* One variant from "k=v,k=v" (a piece without '=' continues the previous
 * value, so 'cpus=0,1' keeps its comma). */
static int variant_parse(const struct variant *base, const char *part, const char *spec)
{
    struct variant v = *base;
    char buf[1024], key[64] = "", val[900] = "";
    bool have = false;
    snprintf(v.label, sizeof v.label, "%s", part);
    snprintf(buf, sizeof buf, "%s", part);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '=');
        if (!eq && have) {
            bench_settings_append(val, sizeof val, ",", tok);
            continue;
        }
        if (have && variant_setting(&v, key, val, spec)) return 2;
        if (!eq) return usage_error("--compare '%s': '%s' is not key=value", spec, tok);
        *eq = '\0';
        snprintf(key, sizeof key, "%s", tok);
        snprintf(val, sizeof val, "%s", eq + 1);
        have = true;
    }
    if (!have) return usage_error("--compare '%s': empty variant", spec);
    if (variant_setting(&v, key, val, spec)) return 2;
    char what[400];
    snprintf(what, sizeof what, "--compare variant '%s'", part);
    if (variant_check(&v, what)) return 2;
    variant_add(&v);
    return 0;
}

static int variants_from_compare(const struct variant *base, const char *spec)
{
    char buf[2048];
    snprintf(buf, sizeof buf, "%s", spec);
    const char *eq = strchr(buf, '=');
    if (!strchr(buf, ';') && eq && !strchr(eq + 1, '=') && strchr(eq, ',')) {
        /* one key, several values: 'policy=usched,linux' */
        char key[64];
        size_t k = (size_t)(eq - buf);
        if (k == 0 || k >= sizeof key) return usage_error("--compare '%s': bad key", spec);
        memcpy(key, buf, k);
        key[k] = '\0';
        for (char *save = NULL, *val = strtok_r(buf + k + 1, ",", &save); val;
             val = strtok_r(NULL, ",", &save)) {
            char part[1100];
            snprintf(part, sizeof part, "%s=%s", key, val);
            if (variant_parse(base, part, spec)) return 2;
        }
        return 0;
    }
    for (char *save = NULL, *part = strtok_r(buf, ";", &save); part; part = strtok_r(NULL, ";", &save)) {
        while (*part == ' ') part++;
        if (!*part) continue;
        if (variant_parse(base, part, spec)) return 2;
    }
    if (B.nv == 0) return usage_error("--compare '%s': no variant", spec);
    return 0;
}

/* Every policy of the library (usched first: the reference), each a variant. */
static int variants_all_policies(const struct variant *base)
{
    int n = usched_policy_count();
    for (int k = -1; k < n; k++) {
        const char *name = k < 0 ? "usched" : usched_policy_name(k);
        if (!name || (k >= 0 && !strcmp(name, "usched"))) continue;
        struct variant v = *base;
        snprintf(v.set.policy, sizeof v.set.policy, "%s", name);
        snprintf(v.label, sizeof v.label, "policy=%s", name);
        if (variant_check(&v, NULL)) return 2;
        variant_add(&v);
    }
    return 0;
}

int bench_variants_peers(void)
{
    if (bench_peer_dir(B.c->peers_dir_opt, B.peers_dir, sizeof B.peers_dir) < 0) {
        fprintf(stderr, "usched bench: %s\n", B.peers_dir);
        return 1;
    }
    const struct bench_systems *sys = B.c->wl->systems;
    for (int i = 0; i < (sys ? sys->n : bench_npeers); i++) {
        struct variant v = {.peer = sys ? sys->names[i] : bench_peer_names[i]};
        snprintf(v.label, sizeof v.label, "%s", v.peer);
        variant_add(&v);
    }
    return 0;
}

int bench_variants(const char *server_cpus)
{
    const struct bench_config *c = B.c;
    struct variant base = {.set = c->base};
    if (server_cpus) { /* the split layout: usched's server on the first half */
        snprintf(base.set.cpus, sizeof base.set.cpus, "%s", server_cpus);
        base.set.has_cpus = true;
    }
    if (c->compare) {
        if (variants_from_compare(&base, c->compare)) return 2;
    } else if (base.set.policy[0]) {
        snprintf(base.label, sizeof base.label, "policy=%s%s%.200s", base.set.policy, base.set.knobs[0] ? "," : "",
                 base.set.knobs);
        if (variant_check(&base, NULL)) return 2;
        variant_add(&base);
    } else if (variants_all_policies(&base)) {
        return 2;
    }
    for (int i = 0; i < B.nv; i++)
        if (B.v[i].set.emulate && !B.v[i].set.has_topology && !getenv("USCHED_TOPOLOGY"))
            return usage_error("--emulate needs a virtual topology (--topology T)");
    return 0;
}

void bench_variants_free(void)
{
    for (int i = 0; i < B.nv; i++) {
        free(B.v[i].values);
        free(B.v[i].counters);
        free(B.v[i].lat);
        free(B.v[i].xfer);
        free(B.v[i].noise_cpus);
    }
    free(B.v);
    B.v = NULL;
    B.nv = 0;
}
