//! `capictl convert`: Cluster API YAML from one API version to the other, offline, as the
//! management cluster converts it (clusterctl's `alpha convert`).

use std::io::Write;

use serde_json::Value;

use crate::api::conversion;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The YAML to convert (several documents are fine); `-` reads stdin.
    #[arg(short = 'f', long = "filename", value_name = "FILE")]
    file: String,
    /// The API version to convert Cluster API objects to; other objects pass through as
    /// they are.
    #[arg(long, value_enum, default_value_t = Version::V1beta2)]
    to: Version,
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum Version {
    V1beta1,
    V1beta2,
}

impl Version {
    fn name(self) -> &'static str {
        match self {
            Version::V1beta1 => conversion::SPOKE,
            Version::V1beta2 => conversion::HUB,
        }
    }
}

pub fn run(args: &Args) -> anyhow::Result<()> {
    let text = if args.file == "-" {
        std::io::read_to_string(std::io::stdin())?
    } else {
        std::fs::read_to_string(&args.file)
            .map_err(|e| anyhow::anyhow!("reading {}: {e}", args.file))?
    };
    let documents: Vec<Value> =
        crate::yaml::from_multiple(&text).map_err(|e| anyhow::anyhow!("{}: {e}", args.file))?;
    let converted = convert_all(documents, args.to.name())?;
    let out = crate::yaml::to_multiple(&converted)?;
    std::io::stdout().lock().write_all(out.as_bytes())?;
    Ok(())
}

/// Every Cluster API object of `documents` in `to_version`; the rest as it is.
fn convert_all(documents: Vec<Value>, to_version: &str) -> anyhow::Result<Vec<Value>> {
    documents
        .into_iter()
        .filter(|d| !d.is_null())
        .enumerate()
        .map(|(i, document)| {
            let kind = document["kind"].as_str().unwrap_or_default().to_string();
            let name = document["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            conversion::convert_offline(document, to_version)
                .map_err(|e| anyhow::anyhow!("document {} ({kind} {name:?}): {e}", i + 1))
        })
        .collect()
}
