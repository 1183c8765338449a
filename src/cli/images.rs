//! `capictl images build`: the Docker provider's node and load-balancer images, the
//! controller image and a small workload image, built here from Debian packages (no registry
//! needed).

use anyhow::Context as _;

use crate::providers::docker::{self, images};

#[derive(Debug, clap::Subcommand)]
pub enum Images {
    /// Build the load-balancer image, a node image per Kubernetes version, the controller
    /// image (capictl:v<version>, what init's Deployments run) and capictl/busybox (to try
    /// workloads offline); what exists and is up to date is kept.
    Build(BuildArgs),
}

#[derive(Debug, clap::Args)]
pub struct BuildArgs {
    /// The Kubernetes versions to build node images for.
    #[arg(long, value_name = "V[,V...]", value_delimiter = ',', default_value = crate::node::image::DEFAULT_VERSION)]
    kubernetes_version: Vec<String>,
    /// Rebuild everything, the Debian root filesystem included.
    #[arg(long)]
    force: bool,
    /// The Debian mirror to debootstrap from [default: the one this host's apt sources name]
    #[arg(long, value_name = "URL")]
    mirror: Option<String>,
}

impl Images {
    pub fn run(self) -> anyhow::Result<()> {
        match self {
            Images::Build(args) => tokio::runtime::Runtime::new()?.block_on(build(args)),
        }
    }
}

async fn build(args: BuildArgs) -> anyhow::Result<()> {
    let started = std::time::Instant::now();
    let built = ensure(args.kubernetes_version, args.force, args.mirror).await?;
    for b in &built {
        let what = if b.reused { "up to date" } else { "built" };
        println!("{}\t{what}", b.image);
    }
    eprintln!("Done in {:.0?}.", started.elapsed());
    Ok(())
}

/// Builds what is missing of the images for `versions`, with a spinner saying what it does.
pub(super) async fn ensure(
    versions: Vec<String>,
    force: bool,
    mirror: Option<String>,
) -> anyhow::Result<Vec<images::Built>> {
    let docker = docker::connect()
        .await
        .context("cannot reach the Docker Engine (is it running? is DOCKER_HOST right?)")?;
    let options = images::BuildOptions {
        versions,
        force,
        mirror,
        binary: std::env::current_exe().context("finding capictl's own binary")?,
        controller_image: crate::build_info::controller_image(),
        work_dir: std::env::temp_dir().join(format!("capictl-images-{}", std::process::id())),
    };
    let spinner = indicatif::ProgressBar::new_spinner().with_message("Checking the images");
    spinner.set_draw_target(indicatif::ProgressDrawTarget::stderr());
    spinner.enable_steady_tick(std::time::Duration::from_millis(120));
    let say = |message: &str| spinner.set_message(message.to_string());
    let result = images::build(&docker, &options, &say).await;
    spinner.finish_and_clear();
    Ok(result?)
}
