//! `capictl generate`: YAML for CRDs, cluster templates and provider components.

use std::io::Write;

use clap::Subcommand;

use super::NotBuilt;
use crate::api::{self, CrdSet};

#[derive(Debug, Subcommand)]
pub enum Generate {
    /// The CustomResourceDefinitions of one or more providers, ready for `kubectl apply -f -`.
    Crds(CrdsArgs),
    /// A workload cluster's objects from a flavor template.
    Cluster(NotBuilt),
    /// A provider's components, as `init` would install them.
    Provider(NotBuilt),
}

#[derive(Debug, clap::Args)]
pub struct CrdsArgs {
    /// Which provider's CRDs; repeat or separate with commas.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "all")]
    provider: Vec<CrdChoice>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum CrdChoice {
    Core,
    KubeadmBootstrap,
    KubeadmControlPlane,
    Docker,
    InMemory,
    Clusterctl,
    All,
}

impl CrdChoice {
    fn sets(self) -> Vec<CrdSet> {
        match self {
            CrdChoice::Core => vec![CrdSet::Core],
            CrdChoice::KubeadmBootstrap => vec![CrdSet::KubeadmBootstrap],
            CrdChoice::KubeadmControlPlane => vec![CrdSet::KubeadmControlPlane],
            CrdChoice::Docker => vec![CrdSet::Docker],
            CrdChoice::InMemory => vec![CrdSet::InMemory],
            CrdChoice::Clusterctl => vec![CrdSet::Clusterctl],
            CrdChoice::All => CrdSet::ALL.to_vec(),
        }
    }
}

impl Generate {
    pub fn run(self) -> anyhow::Result<()> {
        match self {
            Generate::Crds(args) => {
                let mut sets: Vec<CrdSet> = args.provider.iter().flat_map(|c| c.sets()).collect();
                sets.sort_unstable();
                sets.dedup();
                let text = crate::yaml::to_multiple(&api::crds(&sets))?;
                std::io::stdout().lock().write_all(text.as_bytes())?;
                Ok(())
            }
            Generate::Cluster(_) => Err(super::not_built("generate cluster")),
            Generate::Provider(_) => Err(super::not_built("generate provider")),
        }
    }
}
