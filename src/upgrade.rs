//! `capictl upgrade`: which provider versions a management cluster can move to, and how an
//! upgrade keeps what the user set. capictl carries every provider in the binary, so the
//! version available is its own and the contract v1beta2. Pure: the command line does the I/O.

use crate::api::common::kubernetes_version as semver;

/// The version of every provider this binary carries.
pub fn available_version() -> String {
    format!("v{}", crate::build_info::VERSION)
}

/// One provider of the inventory and where it can go.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Row {
    pub name: String,
    pub namespace: String,
    #[serde(rename = "type")]
    pub type_: String,
    /// The provider's name without its type (`kubeadm`, `docker`), as `init` names it.
    #[serde(skip)]
    pub provider_name: String,
    pub current_version: String,
    /// None: already up to date (or, with `blocked`, not reachable in one step).
    pub next_version: Option<String>,
    /// Why the next version cannot be applied from here.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub blocked: Option<String>,
}

/// An inventory entry: name (the manifest label), namespace, type, providerName, version.
#[derive(Clone, Debug)]
pub struct Installed {
    pub name: String,
    pub namespace: String,
    pub type_: String,
    pub provider_name: String,
    pub version: String,
}

/// The plan: one row per installed provider, sorted as clusterctl sorts them (type, name,
/// namespace), or why there is none.
pub fn plan(installed: &[Installed], available: &str) -> Result<Vec<Row>, String> {
    let cores = installed
        .iter()
        .filter(|p| p.type_ == "CoreProvider")
        .count();
    if cores != 1 {
        return Err(format!(
            "invalid management cluster: there must be one core provider, found {cores}"
        ));
    }
    let to = semver(available)
        .ok_or_else(|| format!("capictl's version {available} is not a version"))?;
    let mut rows = Vec::new();
    for p in installed {
        let from = semver(&p.version).ok_or_else(|| {
            format!(
                "the {}/{} provider's inventory version {:?} is not a version (vX.Y.Z); fix the Provider object",
                p.namespace, p.name, p.version
            )
        })?;
        let mut row = Row {
            name: p.name.clone(),
            namespace: p.namespace.clone(),
            type_: p.type_.clone(),
            provider_name: p.provider_name.clone(),
            current_version: p.version.clone(),
            next_version: (to > from).then(|| available.to_string()),
            blocked: None,
        };
        // Upstream's n-3 rule for the core and kubeadm providers: no more than three minor
        // versions in one step.
        let guarded = p.type_ == "CoreProvider" || p.provider_name == "kubeadm";
        if guarded && row.next_version.is_some() && to.0 == from.0 && to.1 > from.1 + 3 {
            row.blocked = Some(format!(
                "upgrade for {}/{} provider can't skip more than 3 versions: upgrade with capictl v{}.{}.x first",
                p.namespace,
                p.name,
                from.0,
                from.1 + 3
            ));
        }
        rows.push(row);
    }
    rows.sort_by(|a, b| (&a.type_, &a.name, &a.namespace).cmp(&(&b.type_, &b.name, &b.namespace)));
    Ok(rows)
}

/// Columns as Go's tabwriter lays out clusterctl's tables: each as wide as its widest cell
/// plus three spaces, at least ten; the last not padded.
pub fn columns(rows: &[Vec<String>]) -> String {
    let widths: Vec<usize> = (0..rows.first().map_or(0, Vec::len))
        .map(|i| {
            rows.iter()
                .map(|r| r.get(i).map_or(0, |c| c.chars().count()))
                .max()
                .unwrap_or(0)
                .saturating_add(3)
                .max(10)
        })
        .collect();
    let mut out = String::new();
    for row in rows {
        let last = row.len().saturating_sub(1);
        for (i, cell) in row.iter().enumerate() {
            if i == last {
                out.push_str(cell);
            } else {
                out.push_str(&format!("{cell:<width$}", width = widths[i]));
            }
        }
        out.push('\n');
    }
    out
}

/// The plan as `clusterctl upgrade plan` prints it.
pub fn render_plan(rows: &[Row], contract: &str) -> String {
    let mut table = vec![
        [
            "NAME",
            "NAMESPACE",
            "TYPE",
            "CURRENT VERSION",
            "NEXT VERSION",
        ]
        .map(String::from)
        .to_vec(),
    ];
    for r in rows {
        let next = match (&r.next_version, &r.blocked) {
            (Some(v), Some(_)) => format!("{v} (blocked)"),
            (Some(v), None) => v.clone(),
            (None, _) => "Already up to date".into(),
        };
        table.push(vec![
            r.name.clone(),
            r.namespace.clone(),
            r.type_.clone(),
            r.current_version.clone(),
            next,
        ]);
    }
    let mut out = format!(
        "\nLatest release available for the {contract} Cluster API contract version:\n\n{}\n",
        columns(&table)
    );
    let blocked: Vec<&String> = rows.iter().filter_map(|r| r.blocked.as_ref()).collect();
    if !blocked.is_empty() {
        for b in blocked {
            out.push_str(&format!("{b}\n"));
        }
        out.push('\n');
    } else if rows.iter().any(|r| r.next_version.is_some()) {
        out.push_str(&format!(
            "You can now apply the upgrade by executing the following command:\n\ncapictl upgrade apply --contract {contract}\n\n"
        ));
    } else {
        out.push_str("You are already up to date!\n\n");
    }
    out
}

/// The next Kubernetes minor version a cluster at `version` may go to (one at a time).
pub fn next_minor(version: &str) -> Option<String> {
    let (major, minor, _) = semver(version)?;
    Some(format!("v{major}.{}", minor + 1))
}

/// The manager container's args after an upgrade: the new release's, with every flag the
/// running Deployment sets kept at its value (feature gates and flags a user changed since
/// init, which clusterctl's re-render loses), and flags only the old one has carried over.
pub fn keep_args(old: &[String], new: &[String]) -> Vec<String> {
    let flag = |arg: &str| arg.split_once('=').map_or(arg, |(k, _)| k).to_string();
    let mut args: Vec<String> = new
        .iter()
        .map(|n| {
            old.iter()
                .find(|o| flag(o) == flag(n))
                .cloned()
                .unwrap_or_else(|| n.clone())
        })
        .collect();
    for o in old {
        if !new.iter().any(|n| flag(n) == flag(o)) {
            args.push(o.clone());
        }
    }
    args
}

#[cfg(test)]
mod tests {
    use super::*;

    fn installed(name: &str, type_: &str, provider: &str, version: &str) -> Installed {
        Installed {
            name: name.into(),
            namespace: format!("{name}-system"),
            type_: type_.into(),
            provider_name: provider.into(),
            version: version.into(),
        }
    }

    fn fresh(version: &str) -> Vec<Installed> {
        vec![
            installed(
                "infrastructure-docker",
                "InfrastructureProvider",
                "docker",
                version,
            ),
            installed("cluster-api", "CoreProvider", "cluster-api", version),
            installed(
                "bootstrap-kubeadm",
                "BootstrapProvider",
                "kubeadm",
                "v0.1.0",
            ),
        ]
    }

    #[test]
    fn the_plan_table_as_clusterctl_prints_it() {
        let rows = plan(&fresh("v0.0.9"), "v0.1.0").unwrap();
        assert_eq!(
            render_plan(&rows, "v1beta2"),
            "
Latest release available for the v1beta2 Cluster API contract version:

NAME                    NAMESPACE                      TYPE                     CURRENT VERSION   NEXT VERSION
bootstrap-kubeadm       bootstrap-kubeadm-system       BootstrapProvider        v0.1.0            Already up to date
cluster-api             cluster-api-system             CoreProvider             v0.0.9            v0.1.0
infrastructure-docker   infrastructure-docker-system   InfrastructureProvider   v0.0.9            v0.1.0

You can now apply the upgrade by executing the following command:

capictl upgrade apply --contract v1beta2

"
        );
        let current = plan(&fresh("v0.1.0"), "v0.1.0").unwrap();
        assert!(render_plan(&current, "v1beta2").ends_with("You are already up to date!\n\n"));
    }

    #[test]
    fn core_and_kubeadm_providers_skip_at_most_three_minor_versions() {
        let rows = plan(&fresh("v0.1.0"), "v0.5.0").unwrap();
        let core = rows.iter().find(|r| r.name == "cluster-api").unwrap();
        assert_eq!(
            core.blocked.as_deref(),
            Some(
                "upgrade for cluster-api-system/cluster-api provider can't skip more than 3 versions: upgrade with capictl v0.4.x first"
            )
        );
        let docker = rows
            .iter()
            .find(|r| r.name == "infrastructure-docker")
            .unwrap();
        assert_eq!(docker.blocked, None);
        assert!(render_plan(&rows, "v1beta2").contains("v0.5.0 (blocked)"));
    }

    #[test]
    fn a_management_cluster_needs_one_core_provider() {
        assert_eq!(
            plan(&fresh("v0.1.0")[..1], "v0.1.0").unwrap_err(),
            "invalid management cluster: there must be one core provider, found 0"
        );
        let mut bad = fresh("v0.1.0");
        bad[1].version = "latest".into();
        assert!(
            plan(&bad, "v0.1.0")
                .unwrap_err()
                .contains("\"latest\" is not a version")
        );
    }

    #[test]
    fn args_the_user_set_survive_an_upgrade() {
        let old: Vec<String> = [
            "--leader-elect",
            "--feature-gates=ClusterTopology=true",
            "--v=4",
            "--sync-period=5m",
        ]
        .map(String::from)
        .to_vec();
        let new: Vec<String> = [
            "--leader-elect",
            "--feature-gates=ClusterTopology=false",
            "--webhook-port=9443",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(
            keep_args(&old, &new),
            vec![
                "--leader-elect",
                "--feature-gates=ClusterTopology=true",
                "--webhook-port=9443",
                "--v=4",
                "--sync-period=5m"
            ]
        );
    }

    #[test]
    fn the_next_kubernetes_minor() {
        assert_eq!(next_minor("v1.30.4").as_deref(), Some("v1.31"));
        assert_eq!(next_minor("nope"), None);
    }
}
