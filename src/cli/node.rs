//! The programs of a capictl node container, which the node image runs (`capictl node …`, not
//! part of the command line users see): the agent (PID 1), kubeadm, the control-plane
//! components the static pods name, `crictl` and `ctr`. In a node, `kubeadm`, `crictl` and
//! `ctr` are links to capictl, dispatched on argv[0].

use std::process::ExitCode;

use crate::node;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a Tokio runtime")
}

fn exit(result: node::Result<()>, program: &str) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{program}: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The node agent, PID 1 of a node container.
pub fn agent() -> ExitCode {
    exit(
        runtime().block_on(node::agent::run(node::Layout::from_env())),
        "node agent",
    )
}

/// Runs one of the node's programs by name.
pub fn program(name: &str, args: &[String]) -> ExitCode {
    match name {
        "kubeadm" => runtime().block_on(node::kubeadm::run(args)),
        "kube-apiserver" => exit(runtime().block_on(node::kube_apiserver::run(args)), name),
        "kube-controller-manager" => exit(
            runtime().block_on(node::controller_manager::run_controller_manager(args)),
            name,
        ),
        "kube-scheduler" => exit(
            runtime().block_on(node::controller_manager::run_scheduler(args)),
            name,
        ),
        "crictl" => node::tools::crictl(args),
        "ctr" => node::tools::ctr(args),
        other => {
            eprintln!("capictl node: there is no node program {other:?}");
            ExitCode::from(2)
        }
    }
}
