//! Crash consistency: `capictl management serve` killed (SIGKILL, no goodbye) at a random
//! moment while in-memory clusters are created, scaled and deleted, then started again; every
//! cluster must converge to its spec. `CAPICTL_CRASH_RUNS` sets how many crashes (3 by
//! default, what CI runs); each run prints its seed, and `CAPICTL_CRASH_SEED` replays one.

use std::time::{Duration, Instant};

use crate::common::management::*;
use crate::move_and_upgrade::{init, objects_of, wait_available};
use crate::production::{machine_uids, machines_once_ready, scale};

/// A small deterministic generator, so that a failing sequence can be replayed by its seed.
struct Moments(u64);

impl Moments {
    fn below(&mut self, bound: u64) -> u64 {
        // Knuth's MMIX constants.
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % bound
    }
}

fn from_env(name: &str) -> Option<u64> {
    std::env::var(name).ok().map(|v| {
        v.parse()
            .unwrap_or_else(|_| panic!("{name} is a number: {v:?}"))
    })
}

/// Each crash comes while work is in flight: a cluster created, another scaled up, an older
/// one deleted. After the restart every remaining cluster is Available with exactly the
/// Machines its spec asks for (never more on the way: each Machine made once), the Machines
/// that were Ready before the crash are still there (none replaced), and every deleted
/// cluster is gone with everything it owned.
#[test]
fn clusters_converge_after_the_management_cluster_is_killed_at_any_moment() {
    let runs = from_env("CAPICTL_CRASH_RUNS").unwrap_or(3);
    let seed = from_env("CAPICTL_CRASH_SEED").unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64
    });
    eprintln!("crash sequence seed {seed} (CAPICTL_CRASH_SEED replays it)");
    let mut moments = Moments(seed);
    let m = Management::up();
    init(&m, "in-memory");
    // The clusters that stay, with their workers; the ones deleted.
    let mut live: Vec<(String, u64)> = Vec::new();
    let mut deleted: Vec<String> = Vec::new();
    for run in 0..runs {
        let kept: Vec<String> = live
            .iter()
            .flat_map(|(name, _)| machine_uids(&m, name))
            .collect();
        let name = format!("crash-{run}");
        m.apply_in_memory_cluster(&name, 1);
        live.push((name, 1));
        if live.len() >= 2 {
            let previous = live.len() - 2;
            let (name, workers) = &mut live[previous];
            *workers += 1 + moments.below(2);
            scale(&m, &format!("{name}-md-0"), *workers as u32);
        }
        if live.len() >= 3 {
            let (name, _) = live.remove(0);
            m.kubectl(&["delete", "cluster", &name, "--wait=false"]);
            deleted.push(name);
        }
        let delay = Duration::from_millis(moments.below(4000));
        std::thread::sleep(delay);
        m.kill();
        m.start();
        eprintln!("run {run}: killed {delay:?} after the changes, started again");

        for (name, workers) in &live {
            wait_available(&m, name);
            let uids = machines_once_ready(&m, name, 1 + *workers as usize);
            for machine in kept.iter().filter(|k| k.starts_with(&format!("{name}-"))) {
                assert!(
                    uids.contains(machine),
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
