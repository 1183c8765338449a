//! What a resource URL addresses, as kube-apiserver's RequestInfo reads it.

/// A parsed resource path: `/api/v1/...` or `/apis/<group>/<version>/...`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ApiPath {
    /// `/api` or `/apis`: the group list.
    Root {
        legacy: bool,
    },
    /// `/apis/<group>`: one group's versions.
    Group {
        group: String,
    },
    /// `/api/v1` or `/apis/<group>/<version>`: the resource list.
    GroupVersion {
        group: String,
        version: String,
    },
    Resource(ResourcePath),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResourcePath {
    pub group: String,
    pub version: String,
    pub namespace: Option<String>,
    pub resource: String,
    pub name: Option<String>,
    pub subresource: Option<String>,
}

/// `%XX` sequences decoded (as Go's `url.PathUnescape`); anything else kept.
pub fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2]))
        {
            out.push((h * 16 + l) as u8);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Parses a path; `None` for paths outside the resource API.
pub fn parse(path: &str) -> Option<ApiPath> {
    let segments: Vec<&str> = path
        .trim_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
        .collect();
    let (group, version, rest) = match segments.as_slice() {
        ["api"] => return Some(ApiPath::Root { legacy: true }),
        ["apis"] => return Some(ApiPath::Root { legacy: false }),
        ["apis", group] => {
            return Some(ApiPath::Group {
                group: group.to_string(),
            });
        }
        ["api", version, rest @ ..] => (String::new(), version.to_string(), rest),
        ["apis", group, version, rest @ ..] => (group.to_string(), version.to_string(), rest),
        _ => return None,
    };
    let resource_path =
        |namespace: Option<&str>, resource: &str, name: Option<&str>, sub: Option<&str>| {
            ApiPath::Resource(ResourcePath {
                group: group.clone(),
                version: version.clone(),
                namespace: namespace.map(String::from),
                resource: resource.to_string(),
                name: name.map(String::from),
                subresource: sub.map(String::from),
            })
        };
    Some(match rest {
        [] => ApiPath::GroupVersion { group, version },
        // A namespace's own subresources look like a namespaced collection.
        ["namespaces", name, sub @ ("status" | "finalize")] if group.is_empty() => {
            resource_path(None, "namespaces", Some(name), Some(sub))
        }
        ["namespaces", ns, resource] => resource_path(Some(ns), resource, None, None),
        ["namespaces", ns, resource, name] => resource_path(Some(ns), resource, Some(name), None),
        ["namespaces", ns, resource, name, sub] => {
            resource_path(Some(ns), resource, Some(name), Some(sub))
        }
        [resource] => resource_path(None, resource, None, None),
        [resource, name] => resource_path(None, resource, Some(name), None),
        [resource, name, sub] => resource_path(None, resource, Some(name), Some(sub)),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn res(
        group: &str,
        ns: Option<&str>,
        resource: &str,
        name: Option<&str>,
        sub: Option<&str>,
    ) -> Option<ApiPath> {
        Some(ApiPath::Resource(ResourcePath {
            group: group.into(),
            version: if group.is_empty() {
                "v1".into()
            } else {
                "v1beta2".into()
            },
            namespace: ns.map(String::from),
            resource: resource.into(),
            name: name.map(String::from),
            subresource: sub.map(String::from),
        }))
    }

    #[test]
    fn paths_table() {
        let g = "cluster.x-k8s.io";
        for (path, want) in [
            ("/api", Some(ApiPath::Root { legacy: true })),
            ("/apis", Some(ApiPath::Root { legacy: false })),
            (
                "/apis/cluster.x-k8s.io",
                Some(ApiPath::Group { group: g.into() }),
            ),
            (
                "/api/v1",
                Some(ApiPath::GroupVersion {
                    group: String::new(),
                    version: "v1".into(),
                }),
            ),
            (
                "/api/v1/namespaces",
                res("", None, "namespaces", None, None),
            ),
            (
                "/api/v1/namespaces/default",
                res("", None, "namespaces", Some("default"), None),
            ),
            (
                "/api/v1/namespaces/default/status",
                res("", None, "namespaces", Some("default"), Some("status")),
            ),
            (
                "/api/v1/namespaces/default/secrets",
                res("", Some("default"), "secrets", None, None),
            ),
            (
                "/api/v1/namespaces/default/secrets/s",
                res("", Some("default"), "secrets", Some("s"), None),
            ),
            (
                "/api/v1/nodes/n1/status",
                res("", None, "nodes", Some("n1"), Some("status")),
            ),
            (
                "/apis/cluster.x-k8s.io/v1beta2/clusters",
                res(g, None, "clusters", None, None),
            ),
            (
                "/apis/cluster.x-k8s.io/v1beta2/namespaces/ns/machinedeployments/md/scale",
                res(
                    g,
                    Some("ns"),
                    "machinedeployments",
                    Some("md"),
                    Some("scale"),
                ),
            ),
            ("/healthz", None),
            ("/api/v1/namespaces/a/b/c/d/e", None),
        ] {
            assert_eq!(parse(path), want, "{path}");
        }
    }
}
