//! `capictl config repositories`: the providers this capictl can install, as clusterctl lists
//! its provider repositories. capictl carries every provider's components in the binary, so
//! the "repository" of each is this capictl itself, and its file the components
//! `capictl generate provider` prints.

use std::io::Write;

use serde::Serialize;

#[derive(Debug, clap::Subcommand)]
pub enum Config {
    /// The providers `init` can install, with where their components come from.
    Repositories(RepositoriesArgs),
}

#[derive(Debug, clap::Args)]
pub struct RepositoriesArgs {
    /// text, or yaml.
    #[arg(short, long, value_enum, default_value = "text")]
    output: Output,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Output {
    Text,
    Yaml,
}

/// One provider, with clusterctl's capitalised keys in YAML.
#[derive(Debug, Serialize)]
pub struct Repository {
    #[serde(rename = "File")]
    file: String,
    #[serde(rename = "Name")]
    name: String,
    #[serde(rename = "ProviderType")]
    provider_type: String,
    #[serde(rename = "URL")]
    url: String,
}

/// The providers, in clusterctl's order (by type, then name).
pub fn repositories() -> Vec<Repository> {
    crate::init::PROVIDERS
        .iter()
        .map(|p| Repository {
            file: format!(
                "{}-components.yaml",
                match p.type_ {
                    "CoreProvider" => "core",
                    "BootstrapProvider" => "bootstrap",
                    "ControlPlaneProvider" => "control-plane",
                    _ => "infrastructure",
                }
            ),
            name: p.name.to_string(),
            provider_type: p.type_.to_string(),
            url: format!("capictl v{} (built in)", crate::build_info::VERSION),
        })
        .collect()
}

/// clusterctl's table: columns as wide as their widest cell plus three spaces, at least ten.
pub fn table(rows: &[Repository]) -> String {
    let header = ["NAME", "TYPE", "URL", "FILE"];
    let cells: Vec<[&str; 4]> = rows
        .iter()
        .map(|r| [&*r.name, &*r.provider_type, &*r.url, &*r.file])
        .collect();
    let widths: Vec<usize> = (0..4)
        .map(|i| {
            cells
                .iter()
                .map(|c| c[i].len())
                .chain([header[i].len()])
                .max()
                .unwrap_or(0)
                .max(10)
                + 3
        })
        .collect();
    let mut out = String::new();
    for row in std::iter::once(header).chain(cells) {
        let line: String = row
            .iter()
            .zip(&widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect();
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

impl Config {
    pub fn run(self) -> anyhow::Result<()> {
        match self {
            Config::Repositories(args) => {
                let rows = repositories();
                let text = match args.output {
                    Output::Text => table(&rows),
                    Output::Yaml => crate::yaml::to_string(&rows)?,
                };
                std::io::stdout().lock().write_all(text.as_bytes())?;
                Ok(())
            }
        }
    }
}
