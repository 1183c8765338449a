//! capictl: Kubernetes Cluster API in Rust — the controllers and a clusterctl-style command line.
//!
//! The binary is a thin shell over this library: [`cli`] parses and runs commands, [`api`] holds
//! the Cluster API types and the CRDs generated from them, [`conditions`] the v1beta2 condition
//! rules every controller shares.

pub mod api;
pub mod apiserver;
pub mod cache;
pub mod cli;
pub mod conditions;
pub mod controllers;
pub mod describe;
pub mod envsubst;
pub mod extensions;
pub mod generate;
pub mod gotemplate;
pub mod https;
pub mod init;
pub mod kubeadm;
pub mod kubeconfig;
pub mod kubernetes;
#[cfg(test)]
mod layering;
pub mod management;
pub mod manager;
pub mod metrics;
pub mod mover;
pub mod node;
pub mod pki;
pub mod providers;
pub mod reconcile;
pub mod topology;
pub mod upgrade;
pub mod webhooks;
pub mod workload;
pub mod yaml;

/// mimalloc for every binary that links capictl (the command, the node agent in the images,
/// tests and benchmarks): the API server and the controllers allocate and free many small JSON
/// values per request, and glibc's malloc and free were a fifth of the API server benchmark's
/// profile.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Build facts recorded by build.rs, shown by `capictl version`.
pub mod build_info {
    pub const VERSION: &str = env!("CARGO_PKG_VERSION");
    pub const GIT_COMMIT: &str = env!("CAPICTL_GIT_COMMIT");
    pub const BUILD_DATE: &str = env!("CAPICTL_BUILD_DATE");

    /// The controller image of this build (`capictl images build` makes it; `init`'s
    /// Deployments run it by default).
    pub fn controller_image() -> String {
        format!("capictl:v{VERSION}")
    }
}

/// Installs ring as the process's one rustls crypto provider. Call before any TLS client or
/// server is built; calling it again is harmless.
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}
