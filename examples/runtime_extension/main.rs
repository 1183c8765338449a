//! An example Runtime Extension written with capictl's types: a handler for every lifecycle
//! hook, answering what a ConfigMap per Cluster says ([`handlers`]). Run it beside a management
//! cluster and register it with an ExtensionConfig (see the README):
//!
//! ```text
//! cargo run --example runtime_extension -- --listen 127.0.0.1:9443 \
//!     --cert-file tls.crt --key-file tls.key
//! ```

mod handlers;

use clap::Parser;

#[derive(Parser)]
struct Args {
    /// Where to serve the hooks (HTTPS).
    #[arg(long, default_value = "0.0.0.0:9443")]
    listen: String,
    /// The serving certificate (PEM); the ExtensionConfig's caBundle must be its CA.
    #[arg(long)]
    cert_file: std::path::PathBuf,
    /// Its private key (PEM).
    #[arg(long)]
    key_file: std::path::PathBuf,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    capictl::install_crypto_provider();
    let args = Args::parse();
    let serving = capictl::pki::KeyPairPem {
        cert: std::fs::read_to_string(&args.cert_file)?,
        key: std::fs::read_to_string(&args.key_file)?,
    };
    // The management cluster, from KUBECONFIG or in-cluster: where the ConfigMaps are.
    let client = kube::Client::try_default().await?;
    let listener = tokio::net::TcpListener::bind(&args.listen).await?;
    eprintln!(
        "serving the example extension's hooks on https://{}",
        listener.local_addr()?
    );
    handlers::extension(client)
        .serve(listener, &serving)
        .await?;
    Ok(())
}
