//! What the crash harnesses share (in-memory and Docker): a replayable sequence of moments,
//! the clusters they keep and what each run asked of them.

/// A small deterministic generator, so that a failing sequence can be replayed by its seed.
pub struct Moments(pub u64);

impl Moments {
    pub fn below(&mut self, bound: u64) -> u64 {
        // Knuth's MMIX constants.
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % bound
    }
}

/// A number from the environment, when set.
pub fn from_env(name: &str) -> Option<u64> {
    std::env::var(name).ok().map(|v| {
        v.parse()
            .unwrap_or_else(|_| panic!("{name} is a number: {v:?}"))
    })
}

/// The sequence's seed: `CAPICTL_CRASH_SEED` to replay one, else the clock's; printed.
pub fn seed() -> u64 {
    let seed = from_env("CAPICTL_CRASH_SEED").unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64
    });
    eprintln!("crash sequence seed {seed} (CAPICTL_CRASH_SEED replays it)");
    seed
}

/// A cluster the harness keeps: its workers, its Kubernetes version, and what the last run
/// asked of it that replaces Machines (so that they are not counted as replaced by the crash).
pub struct Live {
    pub name: String,
    pub workers: usize,
    pub version: &'static str,
    pub replacing: Replacing,
}

impl Live {
    pub fn new(name: String, version: &'static str) -> Live {
        Live {
            name,
            workers: 1,
            version,
            replacing: Replacing::Nothing,
        }
    }

    /// Whether the last run asked to replace `machine` (`name=uid`).
    pub fn asked_to_replace(&self, machine: &str) -> bool {
        match &self.replacing {
            Replacing::Nothing => false,
            Replacing::All => true,
            Replacing::One(victim) => machine.starts_with(&format!("{victim}=")),
        }
    }
}

/// Machines the last run asked to replace: none, all of them (an upgrade) or one
/// (remediation).
#[derive(Clone, PartialEq)]
pub enum Replacing {
    Nothing,
    All,
    One(String),
}

/// What the runs asked of the clusters, for the run's line in the log.
pub fn asked(live: &[Live]) -> String {
    live.iter()
        .filter_map(|c| match &c.replacing {
            Replacing::Nothing => None,
            Replacing::All => Some(format!("{} upgraded", c.name)),
            Replacing::One(victim) => Some(format!("{victim} remediated")),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The changes of one run after a new cluster joined `live`: the one before it scaled up (by
/// 1 to `most_added` workers), the oldest deleted once three are kept (into `deleted`), and
/// the oldest left upgraded to `upgrade` (control plane and workers) or a worker of it marked
/// for remediation (its MachineHealthCheck acts), each by kubectl as a user would.
pub fn change(
    live: &mut Vec<Live>,
    deleted: &mut Vec<String>,
    moments: &mut Moments,
    most_added: u64,
    upgrade: &'static str,
    kubectl: &dyn Fn(&[&str]) -> String,
) {
    if live.len() >= 2 {
        let previous = live.len() - 2;
        let c = &mut live[previous];
        c.workers += 1 + moments.below(most_added) as usize;
        kubectl(&[
            "scale",
            "machinedeployment",
            &format!("{}-md-0", c.name),
            &format!("--replicas={}", c.workers),
        ]);
    }
    if live.len() >= 3 {
        let c = live.remove(0);
        kubectl(&["delete", "cluster", &c.name, "--wait=false"]);
        deleted.push(c.name);
    }
    // The oldest cluster left, which nothing else changes in this run.
    if live.len() >= 2 {
        let c = &mut live[0];
        if c.version != upgrade && moments.below(2) == 0 {
            for command in super::fixtures::upgrade_commands(&c.name, upgrade) {
                kubectl(&command.iter().map(String::as_str).collect::<Vec<_>>());
            }
            c.version = upgrade;
            c.replacing = Replacing::All;
        } else {
            let victim = kubectl(&[
                "get",
                "machines",
                "-l",
                &format!("cluster.x-k8s.io/deployment-name={}-md-0", c.name),
                "-o",
                "jsonpath={.items[0].metadata.name}",
            ]);
            kubectl(&[
                "annotate",
                "machine",
                &victim,
                "cluster.x-k8s.io/remediate-machine=",
            ]);
            c.replacing = Replacing::One(victim);
        }
    }
}
