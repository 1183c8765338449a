//! Crash consistency: `capictl management serve` killed (SIGKILL, no goodbye) at a random
//! moment while in-memory clusters are created, scaled, upgraded, remediated and deleted, then
//! started again; every cluster must converge to its spec. `CAPICTL_CRASH_RUNS` sets how many
//! crashes (3 by default, what CI runs); each run prints its seed, and `CAPICTL_CRASH_SEED`
//! replays one.

use std::time::{Duration, Instant};

use crate::common::crash::{Live, Moments, Replacing, asked, change, from_env, seed};
use crate::common::fixtures::worker_health_check;
use crate::common::management::*;
use crate::move_and_upgrade::{init, machine_lines, objects_of, wait_available};
use crate::production::{machine_uids, machines_once_ready};

/// The version each cluster is upgraded to, once.
const UPGRADE: &str = "v1.31.0";

/// Each crash comes while work is in flight: a cluster created, another scaled up, an older
/// one deleted, and one of the others upgraded (control plane and workers) or a worker of it
/// marked for remediation. After the restart every remaining cluster is Available with exactly
/// the Machines its spec asks for, at its version (never more on the way than a rollout's one
/// at a time), the Machines that were Ready before the crash and nothing asked to replace are
/// still there, and every deleted cluster is gone with everything it owned.
#[test]
fn clusters_converge_after_the_management_cluster_is_killed_at_any_moment() {
    let runs = from_env("CAPICTL_CRASH_RUNS").unwrap_or(3);
    let seed = seed();
    let mut moments = Moments(seed);
    let m = Management::up();
    init(&m, "in-memory");
    let mut live: Vec<Live> = Vec::new();
    let mut deleted: Vec<String> = Vec::new();
    for run in 0..runs {
        let kept: Vec<String> = live
            .iter()
            .flat_map(|c| machine_uids(&m, &c.name))
            .collect();
        for c in &mut live {
            c.replacing = Replacing::Nothing;
        }
        let name = format!("crash-{run}");
        m.apply_in_memory_cluster(&name, 1);
        m.kubectl_in(&["apply", "-f", "-"], Some(&worker_health_check(&name)));
        live.push(Live::new(name, "v1.30.4"));
        change(&mut live, &mut deleted, &mut moments, 2, UPGRADE, &|args| {
            m.kubectl(args)
        });
        let delay = Duration::from_millis(moments.below(4000));
        std::thread::sleep(delay);
        m.kill();
        m.start();
        eprintln!(
            "run {run}: killed {delay:?} after the changes ({}), started again",
            asked(&live)
        );

        for c in &live {
            wait_available(&m, &c.name);
            let count = 1 + c.workers;
            let uids = match &c.replacing {
                Replacing::Nothing => machines_once_ready(&m, &c.name, count),
                // A rollout or a remediation makes one Machine more at a time, per owner.
                Replacing::All => machines_converge(&m, &c.name, count, c.version, count + 2, None),
                Replacing::One(victim) => {
                    machines_converge(&m, &c.name, count, c.version, count + 2, Some(victim))
                }
            };
            let prefix = format!("{}-", c.name);
            for machine in kept.iter().filter(|k| k.starts_with(&prefix)) {
                assert!(
                    c.asked_to_replace(machine) || uids.contains(machine),
                    "seed {seed}, run {run}: {machine} was replaced: {uids:?}"
                );
            }
        }
        for name in &deleted {
            let deadline = Instant::now() + Duration::from_secs(60);
            loop {
                let left = objects_of(&m, name);
                if left.trim().is_empty() {
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "seed {seed}, run {run}: {name} was deleted, but these are left:\n{left}"
                );
                std::thread::sleep(Duration::from_millis(500));
            }
        }
    }
}

/// Waits until the cluster has `count` Machines, all Ready and at `version`, and `replaced`
/// (a Machine marked for remediation) is not among them; their `name=uid`. Fails at once when
/// there are more than `most` (what the rollouts may make at a time).
fn machines_converge(
    m: &Management,
    cluster: &str,
    count: usize,
    version: &str,
    most: usize,
    replaced: Option<&str>,
) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        let rows = machine_lines(
            m,
            cluster,
            "{.metadata.name}={.metadata.uid} {.spec.version} {.status.conditions[?(@.type==\"Ready\")].status} {.metadata.deletionTimestamp}",
        );
        let rows: Vec<Vec<&str>> = rows.lines().map(|l| l.split(' ').collect()).collect();
        assert!(
            rows.len() <= most,
            "more than {most} Machines of {cluster}: {rows:?}"
        );
        let done = rows
            .iter()
            .filter(|r| {
                r.get(1) == Some(&version)
                    && r.get(2) == Some(&"True")
                    && r.get(3).is_none_or(|d| d.is_empty())
            })
            .count();
        let gone = replaced
            .is_none_or(|victim| !rows.iter().any(|r| r[0].starts_with(&format!("{victim}="))));
        if rows.len() == count && done == count && gone {
            let mut uids: Vec<String> = rows.iter().map(|r| r[0].to_string()).collect();
            uids.sort();
            return uids;
        }
        assert!(
            Instant::now() < deadline,
            "{cluster}: not {count} Ready Machines at {version} without {replaced:?}: {rows:?}"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}
