//! `capictl version`.

use serde::Serialize;

use crate::api::CONTRACT_VERSION;
use crate::build_info;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = Format::Text)]
    output: Format,
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum Format {
    Text,
    Short,
    Json,
    Yaml,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Info {
    version: &'static str,
    git_commit: &'static str,
    build_date: &'static str,
    contract: &'static str,
}

pub fn run(args: &Args) -> anyhow::Result<()> {
    let info = Info {
        version: build_info::VERSION,
        git_commit: build_info::GIT_COMMIT,
        build_date: build_info::BUILD_DATE,
        contract: CONTRACT_VERSION,
    };
    match args.output {
        Format::Text => println!(
            "capictl version {}\ngit commit:   {}\nbuild date:   {}\nAPI contract: cluster.x-k8s.io/{}",
            info.version, info.git_commit, info.build_date, info.contract
        ),
        Format::Short => println!("{}", info.version),
        Format::Json => println!("{}", serde_json::to_string_pretty(&info)?),
        Format::Yaml => print!("{}", crate::yaml::to_string(&info)?),
    }
    Ok(())
}
