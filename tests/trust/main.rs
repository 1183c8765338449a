//! The management cluster's guard rails, tried as a hostile user would and as clients send
//! them (kubectl, raw HTTP, the Python client): RBAC that cannot be escalated, impersonation,
//! connections and memory that cannot be exhausted, nothing malformed stored, secrets kept out
//! of answers and logs, and users added the ways Kubernetes adds them. One file per theme.

#[path = "../common/mod.rs"]
mod common;

mod connections;
mod escalation;
mod impersonation;
mod malformed;
mod memory;
mod smaller;
mod users;

use std::path::{Path, PathBuf};
use std::process::Output;

use common::management::{Management, kubeconfig_of, text};

/// kubectl as the user of `kubeconfig`.
pub fn kubectl_as(m: &Management, kubeconfig: &Path, args: &[&str]) -> Output {
    kubectl_as_in(m, kubeconfig, args, None)
}

/// kubectl as the user of `kubeconfig`, fed `input` on stdin.
pub fn kubectl_as_in(
    m: &Management,
    kubeconfig: &Path,
    args: &[&str],
    input: Option<&str>,
) -> Output {
    let mut all = vec!["--kubeconfig", kubeconfig.to_str().unwrap()];
    all.extend(args);
    m.kubectl_output(&all, input)
}

/// A user holding exactly the cluster-wide `rules` (a ClusterRole and its binding, made by the
/// administrator), and their kubeconfig.
pub fn user_with_cluster_rules(m: &Management, user: &str, rules: &str) -> PathBuf {
    let manifest = format!(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: {user}-rules\nrules: {rules}\n---\n\
         apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: {user}-rules\n\
         roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: {user}-rules}}\n\
         subjects: [{{apiGroup: rbac.authorization.k8s.io, kind: User, name: {user}}}]\n"
    );
    m.kubectl_in(&["apply", "-f", "-"], Some(&manifest));
    kubeconfig_of(m, user, &[])
}

/// Asserts that `out` failed with a message containing `expected`.
#[track_caller]
pub fn refused_with(out: &Output, expected: &str) {
    let stderr = text(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains(expected),
        "expected a refusal containing {expected:?}; exit {:?}, stdout {}, stderr {stderr}",
        out.status.code(),
        text(&out.stdout)
    );
}
