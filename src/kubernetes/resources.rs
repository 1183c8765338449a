//! Resource quantities (`100m`, `128Mi`, `1.5`, `2e3`) and what a Pod asks of a Node, as
//! kube-scheduler's `NodeResourcesFit` counts them.

use k8s_openapi::api::core::v1::{Container, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use std::collections::BTreeMap;

/// A quantity's value in its base unit (cores, bytes, Pods); None when it does not parse.
pub fn parse_quantity(text: &str) -> Option<f64> {
    let text = text.trim();
    let split = text
        .find(|c: char| c.is_ascii_alphabetic() && c != 'e' && c != 'E')
        .unwrap_or(text.len());
    let (number, suffix) = text.split_at(split);
    // `2e3` is an exponent; a bare `E` after the number is exa.
    let (number, suffix) = if suffix.is_empty() && (number.ends_with('E') || number.ends_with('e'))
    {
        (&number[..number.len() - 1], "E")
    } else {
        (number, suffix)
    };
    let value: f64 = number.parse().ok()?;
    let factor = match suffix {
        "" => 1.0,
        "n" => 1e-9,
        "u" => 1e-6,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "Ki" => 1024.0,
        "Mi" => 1024.0f64.powi(2),
        "Gi" => 1024.0f64.powi(3),
        "Ti" => 1024.0f64.powi(4),
        "Pi" => 1024.0f64.powi(5),
        "Ei" => 1024.0f64.powi(6),
        _ => return None,
    };
    Some(value * factor)
}

/// Amounts by resource name (`cpu`, `memory`, `pods`, ...).
pub type Amounts = BTreeMap<String, f64>;

fn amounts(list: Option<&BTreeMap<String, Quantity>>) -> Amounts {
    list.into_iter()
        .flatten()
        .filter_map(|(name, q)| Some((name.clone(), parse_quantity(&q.0)?)))
        .collect()
}

fn requests_of(container: &Container) -> Amounts {
    let resources = container.resources.as_ref();
    let requests = amounts(resources.and_then(|r| r.requests.as_ref()));
    // A limit without a request is also the request, as the API server defaults it.
    let mut out = amounts(resources.and_then(|r| r.limits.as_ref()));
    out.extend(requests);
    out
}

/// What a Pod requests: the sum over its containers, or the largest init container's when
/// that is more (init containers run one at a time, before the others), plus its overhead.
pub fn pod_requests(pod: &Pod) -> Amounts {
    let Some(spec) = &pod.spec else {
        return Amounts::new();
    };
    let mut total = Amounts::new();
    for c in &spec.containers {
        for (name, v) in requests_of(c) {
            *total.entry(name).or_default() += v;
        }
    }
    for c in spec.init_containers.iter().flatten() {
        for (name, v) in requests_of(c) {
            let entry = total.entry(name).or_default();
            *entry = entry.max(v);
        }
    }
    for (name, v) in amounts(spec.overhead.as_ref()) {
        *total.entry(name).or_default() += v;
    }
    total
}

/// A Node's allocatable amounts (its capacity when it reports no allocatable).
pub fn allocatable(node: &k8s_openapi::api::core::v1::Node) -> Amounts {
    let status = node.status.as_ref();
    match status.and_then(|s| s.allocatable.as_ref()) {
        Some(a) => amounts(Some(a)),
        None => amounts(status.and_then(|s| s.capacity.as_ref())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn quantities_parse_as_kubernetes_writes_them() {
        for (text, value) in [
            ("100m", 0.1),
            ("1", 1.0),
            ("1.5", 1.5),
            ("128Mi", 134_217_728.0),
            ("1Gi", 1_073_741_824.0),
            ("1G", 1e9),
            ("2e3", 2000.0),
            ("1E", 1e18),
            ("110", 110.0),
            ("500u", 0.0005),
        ] {
            let parsed = parse_quantity(text).unwrap();
            assert!((parsed - value).abs() < value * 1e-9, "{text}: {parsed}");
        }
        for bad in ["", "Mi", "1Xi", "abc"] {
            assert_eq!(parse_quantity(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_pods_requests_count_init_containers_once_and_limits_as_requests() {
        let pod: Pod = serde_json::from_value(json!({
            "spec": {
                "initContainers": [{"name": "i", "resources": {"requests": {"cpu": "2"}}}],
                "containers": [
                    {"name": "a", "resources": {"requests": {"cpu": "500m", "memory": "64Mi"}}},
                    {"name": "b", "resources": {"limits": {"cpu": "250m", "memory": "64Mi"}}},
                ],
            }
        }))
        .unwrap();
        let r = pod_requests(&pod);
        assert_eq!(
            r["cpu"], 2.0,
            "the init container asks more than the others together"
        );
        assert_eq!(r["memory"], 128.0 * 1024.0 * 1024.0);
    }
}
