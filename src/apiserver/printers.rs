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

/// `ready/desired` of a StatefulSet.
pub fn stateful_ready(o: &Value) -> Value {
    let desired = o
        .pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .unwrap_or(1);
    json!(format!("{}/{desired}", count(o, "/status/readyReplicas")))
}

/// The names or images of a Pod template's containers, comma-separated.
fn template_containers(template: &Value, field: &str) -> Value {
    let all: Vec<&str> = template["spec"]["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c[field].as_str())
        .collect();
    json!(all.join(","))
}

pub fn template_container_names(o: &Value) -> Value {
    template_containers(&o["spec"]["template"], "name")
}
pub fn template_images(o: &Value) -> Value {
    template_containers(&o["spec"]["template"], "image")
}
pub fn cron_container_names(o: &Value) -> Value {
    template_containers(&o["spec"]["jobTemplate"]["spec"]["template"], "name")
}
pub fn cron_images(o: &Value) -> Value {
    template_containers(&o["spec"]["jobTemplate"]["spec"]["template"], "image")
}

/// A label selector as kubectl writes it, `<none>` for an empty one.
fn selector(s: &Value) -> Value {
    let text = super::selector::format(s);
    json!(if text.is_empty() {
        "<none>".to_string()
    } else {
        text
    })
}

/// A workload's or a Job's label selector.
pub fn workload_selector(o: &Value) -> Value {
    selector(&o["spec"]["selector"])
}

/// A Service's selector, `k=v` pairs, `<none>` without one.
pub fn service_selector(o: &Value) -> Value {
    selector(&json!({"matchLabels": o["spec"]["selector"]}))
}

/// A Service's external addresses: its load balancer's, else its external IPs; `<pending>`
/// for a LoadBalancer without one yet.
pub fn service_external_ip(o: &Value) -> Value {
    let ingress: Vec<&str> = o["status"]["loadBalancer"]["ingress"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|i| i["ip"].as_str().or(i["hostname"].as_str()))
        .collect();
    let external: Vec<&str> = o["spec"]["externalIPs"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let text = match o["spec"]["type"].as_str().unwrap_or("ClusterIP") {
        "ExternalName" => o["spec"]["externalName"]
            .as_str()
            .unwrap_or("<none>")
            .to_string(),
        "LoadBalancer" if ingress.is_empty() && external.is_empty() => "<pending>".into(),
        "LoadBalancer" => ingress
            .iter()
            .chain(&external)
            .copied()
            .collect::<Vec<_>>()
            .join(","),
        _ if external.is_empty() => "<none>".into(),
        _ => external.join(","),
    };
    json!(text)
}

/// A Service's ports as kubectl writes them: `80/TCP`, with the node port `80:30080/TCP`.
pub fn service_ports(o: &Value) -> Value {
    let ports: Vec<String> = o["spec"]["ports"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| {
            let protocol = p["protocol"].as_str().unwrap_or("TCP");
            match p["nodePort"].as_i64().filter(|n| *n != 0) {
                Some(node) => format!("{}:{node}/{protocol}", p["port"]),
                None => format!("{}/{protocol}", p["port"]),
            }
        })
        .collect();
    json!(if ports.is_empty() {
        "<none>".to_string()
    } else {
        ports.join(",")
    })
}

/// A Node's address of a type, `<none>` without one.
fn node_address(o: &Value, kind: &str) -> Value {
    let found = o["status"]["addresses"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|a| a["type"] == kind)
        .and_then(|a| a["address"].as_str());
    json!(found.unwrap_or("<none>"))
}

pub fn node_internal_ip(o: &Value) -> Value {
    node_address(o, "InternalIP")
}
pub fn node_external_ip(o: &Value) -> Value {
    node_address(o, "ExternalIP")
}

fn has_condition(o: &Value, kind: &str) -> bool {
    o["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == kind && c["status"] == "True")
}

/// A Job's status as kubectl prints it.
pub fn job_status(o: &Value) -> Value {
    let status = match () {
        _ if has_condition(o, "Failed") => "Failed",
        _ if has_condition(o, "Complete") => "Complete",
        _ if o["metadata"]["deletionTimestamp"].is_string() => "Terminating",
        _ if has_condition(o, "FailureTarget") => "FailureTarget",
        _ if has_condition(o, "SuccessCriteriaMet") => "SuccessCriteriaMet",
        _ if has_condition(o, "Suspended") || o["spec"]["suspend"] == true => "Suspended",
        _ => "Running",
    };
    json!(status)
}

/// `succeeded/completions`, or for a work queue `succeeded/1 of parallelism`.
pub fn job_completions(o: &Value) -> Value {
    let succeeded = count(o, "/status/succeeded");
    let text = match o.pointer("/spec/completions").and_then(Value::as_i64) {
        Some(completions) => format!("{succeeded}/{completions}"),
        None => match o
            .pointer("/spec/parallelism")
            .and_then(Value::as_i64)
            .unwrap_or(1)
        {
            p if p > 1 => format!("{succeeded}/1 of {p}"),
            _ => format!("{succeeded}/1"),
        },
    };
    json!(text)
}

fn seconds_of(v: &Value) -> Option<i64> {
    v.as_str()?
        .parse::<k8s_openapi::jiff::Timestamp>()
        .ok()
        .map(|t| t.as_second())
}

/// How long a Job ran: from its start to its completion, or to now.
pub fn job_duration(o: &Value) -> Value {
    let Some(start) = seconds_of(&o["status"]["startTime"]) else {
        return json!("");
    };
    let end = seconds_of(&o["status"]["completionTime"])
        .unwrap_or_else(|| k8s_openapi::jiff::Timestamp::now().as_second());
    json!(super::table::human_duration(end - start))
}

pub fn cron_time_zone(o: &Value) -> Value {
    or_none(&o["spec"]["timeZone"])
}
pub fn cron_suspend(o: &Value) -> Value {
    json!(if o["spec"]["suspend"] == true {
        "True"
    } else {
        "False"
    })
}
pub fn cron_active(o: &Value) -> Value {
    json!(o["status"]["active"].as_array().map_or(0, Vec::len))
}

/// How long ago the CronJob last ran, `<none>` before its first run.
pub fn cron_last_schedule(o: &Value) -> Value {
    match seconds_of(&o["status"]["lastScheduleTime"]) {
        Some(t) => json!(super::table::human_duration(
            k8s_openapi::jiff::Timestamp::now().as_second() - t
        )),
        None => json!("<none>"),
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
    fn jobs_stateful_sets_and_cron_jobs_as_kubectl_prints_them() {
        let complete = json!({
            "spec": {"completions": 3, "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": "u1"}}},
            "status": {"succeeded": 3, "startTime": "2026-12-05T10:00:00Z", "completionTime": "2026-12-05T10:00:42Z",
                "conditions": [{"type": "SuccessCriteriaMet", "status": "True"}, {"type": "Complete", "status": "True"}]},
        });
        assert_eq!(job_status(&complete), json!("Complete"));
        assert_eq!(job_completions(&complete), json!("3/3"));
        assert_eq!(job_duration(&complete), json!("42s"));
        assert_eq!(
            workload_selector(&complete),
            json!("batch.kubernetes.io/controller-uid=u1")
        );
        let queue = json!({"spec": {"parallelism": 2}, "status": {"succeeded": 1}});
        assert_eq!(
            (job_status(&queue), job_completions(&queue)),
            (json!("Running"), json!("1/1 of 2"))
        );
        let set = json!({"spec": {"replicas": 3, "template": {"spec": {"containers": [
            {"name": "db", "image": "postgres:16"}, {"name": "exporter", "image": "exporter:1"}]}}},
            "status": {"readyReplicas": 2}});
        assert_eq!(stateful_ready(&set), json!("2/3"));
        assert_eq!(template_container_names(&set), json!("db,exporter"));
        assert_eq!(template_images(&set), json!("postgres:16,exporter:1"));
        let service = json!({"spec": {"type": "NodePort", "selector": {"app": "web"},
            "ports": [{"port": 80, "nodePort": 30080, "protocol": "TCP"}, {"port": 53, "protocol": "UDP"}]}});
        assert_eq!(service_ports(&service), json!("80:30080/TCP,53/UDP"));
        assert_eq!(service_external_ip(&service), json!("<none>"));
        assert_eq!(service_selector(&service), json!("app=web"));
        let balanced = json!({"spec": {"type": "LoadBalancer"}});
        assert_eq!(service_external_ip(&balanced), json!("<pending>"));
        assert_eq!(service_selector(&balanced), json!("<none>"));
        let node =
            json!({"status": {"addresses": [{"type": "InternalIP", "address": "172.18.0.3"}]}});
        assert_eq!(
            (node_internal_ip(&node), node_external_ip(&node)),
            (json!("172.18.0.3"), json!("<none>"))
        );
        let cron = json!({"spec": {"schedule": "*/5 * * * *"}, "status": {"active": [{"name": "tick-1"}]}});
        assert_eq!(
            (
                cron_time_zone(&cron),
                cron_suspend(&cron),
                cron_active(&cron),
                cron_last_schedule(&cron)
            ),
            (json!("<none>"), json!("False"), json!(1), json!("<none>"))
        );
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
