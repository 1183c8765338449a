//! Table cells kube-apiserver computes for the workload kinds (its `printers.go`), so that
//! `kubectl get pods` shows READY, STATUS and RESTARTS as it does against kube-apiserver.

use serde_json::{Value, json};

fn containers<'a>(o: &'a Value, list: &str) -> impl Iterator<Item = &'a Value> {
    o["status"][list].as_array().into_iter().flatten()
}

/// `ready/total` containers.
pub fn pod_ready(o: &Value) -> Value {
    let total = o["spec"]["containers"].as_array().map_or(0, Vec::len);
    let ready = containers(o, "containerStatuses")
        .filter(|c| c["ready"] == true)
        .count();
    json!(format!("{ready}/{total}"))
}

/// The Pod's status as kubectl prints it: the phase, or what holds it (an init container's
/// progress, a waiting or terminated container's reason), `Terminating` when deleted.
pub fn pod_status(o: &Value) -> Value {
    let status = &o["status"];
    let mut reason = status["reason"]
        .as_str()
        .or(status["phase"].as_str())
        .unwrap_or("Pending")
        .to_string();
    let inits: Vec<&Value> = containers(o, "initContainerStatuses").collect();
    let total_inits = o["spec"]["initContainers"].as_array().map_or(0, Vec::len);
    let mut initializing = false;
    for (i, c) in inits.iter().enumerate() {
        let state = &c["state"];
        if state["terminated"]["exitCode"] == 0 && state["terminated"].is_object() {
            continue;
        }
        initializing = true;
        reason = if let Some(r) = state["terminated"]["reason"]
            .as_str()
            .filter(|r| !r.is_empty())
        {
            format!("Init:{r}")
        } else if state["terminated"].is_object() {
            format!("Init:ExitCode:{}", state["terminated"]["exitCode"])
        } else if let Some(r) = state["waiting"]["reason"]
            .as_str()
            .filter(|r| !r.is_empty() && *r != "PodInitializing")
        {
            format!("Init:{r}")
        } else {
            format!("Init:{i}/{total_inits}")
        };
        break;
    }
    if !initializing {
        let mut running = false;
        let statuses: Vec<&Value> = containers(o, "containerStatuses").collect();
        for c in statuses.iter().rev() {
            let state = &c["state"];
            if let Some(r) = state["waiting"]["reason"]
                .as_str()
                .filter(|r| !r.is_empty())
            {
                reason = r.to_string();
            } else if let Some(r) = state["terminated"]["reason"]
                .as_str()
                .filter(|r| !r.is_empty())
            {
                reason = r.to_string();
            } else if state["terminated"].is_object() {
                reason = match state["terminated"]["signal"].as_i64().filter(|s| *s != 0) {
                    Some(signal) => format!("Signal:{signal}"),
                    None => format!("ExitCode:{}", state["terminated"]["exitCode"]),
                };
            } else if c["ready"] == true && state["running"].is_object() {
                running = true;
            }
        }
        if reason == "Completed" && running {
            reason = "Running".into();
        }
    }
    if o["metadata"]["deletionTimestamp"].is_string() {
        reason = if status["reason"] == "NodeLost" {
            "Unknown".into()
        } else {
            "Terminating".into()
        };
    }
    json!(reason)
}

/// The restarts of the Pod's containers, with how long ago the last one ended.
pub fn pod_restarts(o: &Value) -> Value {
    let statuses: Vec<&Value> = containers(o, "initContainerStatuses")
        .chain(containers(o, "containerStatuses"))
        .collect();
    let restarts: i64 = statuses
        .iter()
        .filter_map(|c| c["restartCount"].as_i64())
        .sum();
    let last = statuses
        .iter()
        .filter_map(|c| c["lastState"]["terminated"]["finishedAt"].as_str())
        .filter_map(|t| t.parse::<k8s_openapi::jiff::Timestamp>().ok())
        .max();
    match last {
        Some(t) if restarts > 0 => {
            let ago = k8s_openapi::jiff::Timestamp::now().as_second() - t.as_second();
            json!(format!(
                "{restarts} ({} ago)",
                super::table::human_duration(ago)
            ))
        }
        _ => json!(restarts.to_string()),
    }
}

/// The Pod's IP, `<none>` before it has one.
pub fn pod_ip(o: &Value) -> Value {
    json!(o["status"]["podIP"].as_str().unwrap_or("<none>"))
}

/// A field's value, `<none>` when unset.
fn or_none(v: &Value) -> Value {
    match v.as_str() {
        Some(s) if !s.is_empty() => json!(s),
        _ => json!("<none>"),
    }
}

pub fn pod_node(o: &Value) -> Value {
    or_none(&o["spec"]["nodeName"])
}

pub fn pod_nominated_node(o: &Value) -> Value {
    or_none(&o["status"]["nominatedNodeName"])
}

/// `true/total` readiness gates, `<none>` without gates.
pub fn pod_readiness_gates(o: &Value) -> Value {
    let Some(gates) = o["spec"]["readinessGates"]
        .as_array()
        .filter(|g| !g.is_empty())
    else {
        return json!("<none>");
    };
    let met = gates
        .iter()
        .filter(|g| {
            o["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["type"] == g["conditionType"] && c["status"] == "True")
        })
        .count();
    json!(format!("{met}/{}", gates.len()))
}

/// A number at a path, 0 when unset (kubectl shows replica counts so).
fn count(o: &Value, pointer: &str) -> Value {
    json!(o.pointer(pointer).and_then(Value::as_i64).unwrap_or(0))
}

pub fn replicas_desired(o: &Value) -> Value {
    count(o, "/spec/replicas")
}
pub fn replicas_current(o: &Value) -> Value {
    count(o, "/status/replicas")
}
pub fn replicas_ready(o: &Value) -> Value {
    count(o, "/status/readyReplicas")
}
pub fn daemons_desired(o: &Value) -> Value {
    count(o, "/status/desiredNumberScheduled")
}
pub fn daemons_current(o: &Value) -> Value {
    count(o, "/status/currentNumberScheduled")
}
pub fn daemons_ready(o: &Value) -> Value {
    count(o, "/status/numberReady")
}
pub fn daemons_updated(o: &Value) -> Value {
    count(o, "/status/updatedNumberScheduled")
}
pub fn daemons_available(o: &Value) -> Value {
    count(o, "/status/numberAvailable")
}

/// `key=value,...` of the Pod template's node selector, `<none>` without one.
pub fn daemons_node_selector(o: &Value) -> Value {
    match o["spec"]["template"]["spec"]["nodeSelector"].as_object() {
        Some(m) if !m.is_empty() => json!(
            m.iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
                .collect::<Vec<_>>()
                .join(",")
        ),
        _ => json!("<none>"),
    }
}

/// A budget's bound, `N/A` when it uses the other one.
fn budget_bound(o: &Value, field: &str) -> Value {
    match &o["spec"][field] {
        Value::Null => json!("N/A"),
        Value::String(s) => json!(s),
        v => json!(v.to_string()),
    }
}

pub fn budget_min_available(o: &Value) -> Value {
    budget_bound(o, "minAvailable")
}
pub fn budget_max_unavailable(o: &Value) -> Value {
    budget_bound(o, "maxUnavailable")
}
pub fn budget_allowed(o: &Value) -> Value {
    count(o, "/status/disruptionsAllowed")
}

/// `ip:port,...` of an Endpoints object (three, then `+ N more...`), `<none>` when empty.
pub fn endpoints(o: &Value) -> Value {
    let mut all = Vec::new();
    for subset in o["subsets"].as_array().into_iter().flatten() {
        let ports: Vec<i64> = subset["ports"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| p["port"].as_i64())
            .collect();
        for address in subset["addresses"].as_array().into_iter().flatten() {
            let ip = address["ip"].as_str().unwrap_or_default();
            if ports.is_empty() {
                all.push(ip.to_string());
            }
            all.extend(ports.iter().map(|p| format!("{ip}:{p}")));
        }
    }
    if all.is_empty() {
        return json!("<none>");
    }
    let shown = all.iter().take(3).cloned().collect::<Vec<_>>().join(",");
    if all.len() > 3 {
        json!(format!("{shown} + {} more...", all.len() - 3))
    } else {
        json!(shown)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pod_cells_as_kubectl_prints_them() {
        let cases = [
            (
                json!({"spec": {"containers": [{}]}, "status": {"phase": "Pending"}}),
                "0/1",
                "Pending",
                "0",
            ),
            (
                json!({"spec": {"containers": [{}, {}]}, "status": {"phase": "Running", "containerStatuses": [
                    {"ready": true, "restartCount": 0, "state": {"running": {}}},
                    {"ready": false, "restartCount": 3, "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}}),
                "1/2",
                "CrashLoopBackOff",
                "3",
            ),
            (
                json!({"spec": {"containers": [{}], "initContainers": [{}, {}]}, "status": {"phase": "Pending",
                    "initContainerStatuses": [{"state": {"terminated": {"exitCode": 0}}}, {"state": {"running": {}}}],
                    "containerStatuses": [{"ready": false, "state": {"waiting": {"reason": "PodInitializing"}}}]}}),
                "0/1",
                "Init:1/2",
                "0",
            ),
            (
                json!({"spec": {"containers": [{}]}, "status": {"phase": "Failed", "containerStatuses": [{"state": {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}}]}}),
                "0/1",
                "OOMKilled",
                "0",
            ),
            (
                json!({"metadata": {"deletionTimestamp": "2026-12-05T10:00:00Z"}, "spec": {"containers": [{}]}, "status": {"phase": "Running"}}),
                "0/1",
                "Terminating",
                "0",
            ),
        ];
        for (pod, ready, status, restarts) in cases {
            assert_eq!(pod_ready(&pod), json!(ready), "{pod}");
            assert_eq!(pod_status(&pod), json!(status), "{pod}");
            assert_eq!(pod_restarts(&pod), json!(restarts), "{pod}");
        }
    }

    #[test]
    fn endpoints_show_three_and_count_the_rest() {
        let e = json!({"subsets": [{"addresses": [{"ip": "10.0.0.1"}, {"ip": "10.0.0.2"}, {"ip": "10.0.0.3"}, {"ip": "10.0.0.4"}], "ports": [{"port": 80}]}]});
        assert_eq!(
            endpoints(&e),
            json!("10.0.0.1:80,10.0.0.2:80,10.0.0.3:80 + 1 more...")
        );
        assert_eq!(endpoints(&json!({})), json!("<none>"));
    }
}
