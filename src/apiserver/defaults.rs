//! kube-apiserver's defaulting of built-in kinds, applied to new objects (and to updates, where
//! a field a client dropped comes back as kube-apiserver would give it): a Pod is `Pending`
//! with its spec's defaults and the `default` ServiceAccount, a Service gets its type, ports'
//! protocols and target ports, IP families and a cluster IP from the service range, and the
//! workload kinds get their spec defaults and their Pod templates the Pod's.
//!
//! Only what kube-apiserver's own defaulting does is done here: nothing schedules the Pod or
//! runs the Job.

use std::net::Ipv4Addr;

use serde_json::{Value, json};

/// The service range of a management cluster (kubeadm's default).
pub const SERVICE_CIDR: (Ipv4Addr, u8) = (Ipv4Addr::new(10, 96, 0, 0), 12);

/// Sets `object[key]` when it is absent, null or an empty string (Go's defaulters see a
/// non-pointer string's "" as unset).
fn default_to(object: &mut Value, key: &str, value: Value) {
    if object
        .get(key)
        .is_none_or(|v| v.is_null() || v.as_str() == Some(""))
    {
        object[key] = value;
    }
}

/// The image pull policy kube-apiserver picks: Always for `:latest` or an untagged image,
/// IfNotPresent for any other tag or a digest.
fn pull_policy(image: &str) -> &'static str {
    let name = image.rsplit('/').next().unwrap_or(image);
    if image.contains('@') {
        return "IfNotPresent";
    }
    match name.split_once(':') {
        Some((_, "latest")) | None => "Always",
        Some(_) => "IfNotPresent",
    }
}

fn default_container(container: &mut Value) {
    if !container.is_object() {
        return;
    }
    default_to(
        container,
        "terminationMessagePath",
        json!("/dev/termination-log"),
    );
    default_to(container, "terminationMessagePolicy", json!("File"));
    let image = container["image"].as_str().unwrap_or_default().to_string();
    default_to(container, "imagePullPolicy", json!(pull_policy(&image)));
    default_to(container, "resources", json!({}));
    // `get_mut`, not indexing: indexing would add the missing list as a null.
    if let Some(ports) = container.get_mut("ports").and_then(Value::as_array_mut) {
        for port in ports.iter_mut().filter(|p| p.is_object()) {
            default_to(port, "protocol", json!("TCP"));
        }
    }
}

/// A Pod spec's defaults (also those of every Pod template).
pub fn default_pod_spec(spec: &mut Value) {
    if !spec.is_object() {
        return;
    }
    default_to(spec, "restartPolicy", json!("Always"));
    default_to(spec, "terminationGracePeriodSeconds", json!(30));
    default_to(spec, "dnsPolicy", json!("ClusterFirst"));
    default_to(spec, "securityContext", json!({}));
    default_to(spec, "schedulerName", json!("default-scheduler"));
    default_to(spec, "enableServiceLinks", json!(true));
    for list in ["initContainers", "containers", "ephemeralContainers"] {
        if let Some(containers) = spec.get_mut(list).and_then(Value::as_array_mut) {
            containers.iter_mut().for_each(default_container);
        }
    }
}

fn default_template(workload: &mut Value) {
    if let Some(spec) = workload.pointer_mut("/spec/template/spec") {
        default_pod_spec(spec);
    }
}

/// A new Pod: its spec's defaults, the namespace's `default` ServiceAccount (kube-apiserver's
/// ServiceAccount admission), priority 0, and `Pending` until something runs it.
fn default_pod(pod: &mut Value) {
    let spec = &mut pod["spec"];
    default_pod_spec(spec);
    if spec.is_object() {
        default_to(spec, "serviceAccountName", json!("default"));
        let account = spec["serviceAccountName"].clone();
        default_to(spec, "serviceAccount", account);
        default_to(spec, "priority", json!(0));
        default_to(spec, "preemptionPolicy", json!("PreemptLowerPriority"));
    }
    if pod["status"].get("phase").is_none() {
        pod["status"] = json!({"phase": "Pending", "qosClass": qos_class(&pod["spec"])});
    }
}

/// Where kube-apiserver's ServiceAccount admission mounts a Pod's API credentials.
pub const SERVICE_ACCOUNT_MOUNT: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// kube-apiserver's ServiceAccount admission for a Pod that automounts its token: a
/// `kube-api-access-<suffix>` projected volume (a token of its ServiceAccount, the cluster CA
/// from `kube-root-ca.crt`, the namespace) mounted read-only at [`SERVICE_ACCOUNT_MOUNT`] in
/// every container that has nothing there yet.
pub fn mount_service_account_token(pod: &mut Value, suffix: &str) {
    let spec = &mut pod["spec"];
    if !spec.is_object() {
        return;
    }
    let name = format!("kube-api-access-{suffix}");
    let volume = json!({
        "name": name,
        "projected": {
            "defaultMode": 420,
            "sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
            ],
        },
    });
    let mut mounted = false;
    for list in ["initContainers", "containers"] {
        for container in spec[list].as_array_mut().into_iter().flatten() {
            let taken = container["volumeMounts"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|m| m["mountPath"] == SERVICE_ACCOUNT_MOUNT);
            if taken {
                continue;
            }
            if !container["volumeMounts"].is_array() {
                container["volumeMounts"] = json!([]);
            }
            let mounts = container["volumeMounts"].as_array_mut().expect("an array");
            mounts
                .push(json!({"name": name, "readOnly": true, "mountPath": SERVICE_ACCOUNT_MOUNT}));
            mounted = true;
        }
    }
    if mounted {
        if !spec["volumes"].is_array() {
            spec["volumes"] = json!([]);
        }
        spec["volumes"]
            .as_array_mut()
            .expect("an array")
            .push(volume);
    }
}

/// BestEffort without requests or limits, Guaranteed when every container's limits equal
/// its requests for CPU and memory, Burstable otherwise.
fn qos_class(spec: &Value) -> &'static str {
    let containers = spec["containers"].as_array().cloned().unwrap_or_default();
    let resources = |c: &Value, kind: &str| c["resources"][kind].as_object().cloned();
    let any = containers.iter().any(|c| {
        resources(c, "requests").is_some_and(|r| !r.is_empty())
            || resources(c, "limits").is_some_and(|l| !l.is_empty())
    });
    if !any {
        return "BestEffort";
    }
    let guaranteed = containers.iter().all(|c| {
        let limits = resources(c, "limits").unwrap_or_default();
        let requests = resources(c, "requests").unwrap_or_default();
        ["cpu", "memory"].iter().all(|k| {
            limits.get(*k).is_some() && requests.get(*k).is_none_or(|r| Some(r) == limits.get(*k))
        })
    });
    if guaranteed {
        "Guaranteed"
    } else {
        "Burstable"
    }
}

/// A Service's defaults; `allocate` gives a free cluster IP when it needs one.
fn default_service(service: &mut Value, allocate: impl FnOnce() -> Option<String>) {
    let spec = &mut service["spec"];
    if !spec.is_object() {
        *spec = json!({});
    }
    default_to(spec, "type", json!("ClusterIP"));
    default_to(spec, "sessionAffinity", json!("None"));
    let kind = spec["type"].as_str().unwrap_or_default().to_string();
    if let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) {
        for port in ports.iter_mut().filter(|p| p.is_object()) {
            default_to(port, "protocol", json!("TCP"));
            let number = port["port"].clone();
            default_to(port, "targetPort", number);
        }
    }
    if kind == "ExternalName" {
        return;
    }
    default_to(spec, "internalTrafficPolicy", json!("Cluster"));
    if matches!(kind.as_str(), "NodePort" | "LoadBalancer") {
        default_to(spec, "externalTrafficPolicy", json!("Cluster"));
    }
    if spec.get("clusterIP").is_none_or(|ip| ip == "")
        && let Some(ip) = allocate()
    {
        spec["clusterIP"] = json!(ip);
    }
    if spec["clusterIP"] != "None" {
        let ip = spec["clusterIP"].clone();
        default_to(spec, "clusterIPs", json!([ip]));
    }
    default_to(spec, "ipFamilies", json!(["IPv4"]));
    default_to(spec, "ipFamilyPolicy", json!("SingleStack"));
    if !service["status"].is_object() {
        service["status"] = json!({"loadBalancer": {}});
    }
}

/// The workload kinds' spec defaults, as kube-apiserver's apps/v1 and batch/v1 defaulting.
fn default_workload(plural: &str, workload: &mut Value) {
    // Looked up, not indexed: indexing would add `"spec": null` to every other core kind.
    let Some(spec) = workload.get_mut("spec").filter(|spec| spec.is_object()) else {
        return;
    };
    match plural {
        "deployments" => {
            default_to(spec, "replicas", json!(1));
            default_to(spec, "revisionHistoryLimit", json!(10));
            default_to(spec, "progressDeadlineSeconds", json!(600));
            default_to(
                spec,
                "strategy",
                json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}}),
            );
        }
        "replicasets" | "replicationcontrollers" => default_to(spec, "replicas", json!(1)),
        "statefulsets" => {
            default_to(spec, "replicas", json!(1));
            default_to(spec, "podManagementPolicy", json!("OrderedReady"));
            default_to(spec, "revisionHistoryLimit", json!(10));
            default_to(
                spec,
                "updateStrategy",
                json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}),
            );
        }
        "daemonsets" => {
            default_to(spec, "revisionHistoryLimit", json!(10));
            default_to(
                spec,
                "updateStrategy",
                json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}}),
            );
        }
        "jobs" => {
            default_to(spec, "parallelism", json!(1));
            default_to(spec, "completions", json!(1));
            default_to(spec, "backoffLimit", json!(6));
            default_to(spec, "completionMode", json!("NonIndexed"));
            default_to(spec, "suspend", json!(false));
        }
        "cronjobs" => {
            default_to(spec, "concurrencyPolicy", json!("Allow"));
            default_to(spec, "suspend", json!(false));
            default_to(spec, "successfulJobsHistoryLimit", json!(3));
            default_to(spec, "failedJobsHistoryLimit", json!(1));
            if let Some(template) = spec.pointer_mut("/jobTemplate/spec/template/spec") {
                default_pod_spec(template);
            }
        }
        _ => return,
    }
    default_template(workload);
}

/// Applies kube-apiserver's defaults to a built-in object of `group`/`plural`; `allocate`
/// gives a free cluster IP to a Service that needs one.
pub fn apply(
    group: &str,
    plural: &str,
    object: &mut Value,
    allocate: impl FnOnce() -> Option<String>,
) {
    match (group, plural) {
        ("", "pods") => default_pod(object),
        ("", "services") => default_service(object, allocate),
        ("", "podtemplates") => {
            if let Some(spec) = object.pointer_mut("/template/spec") {
                default_pod_spec(spec);
            }
        }
        ("" | "apps" | "batch", plural) => default_workload(plural, object),
        _ => {}
    }
}

/// A free address of `cidr` for a Service: not the network's, not its first (the
/// `default/kubernetes` Service's), not one of `used`; starting from `seed` so that servers
/// and restarts do not pick in step.
pub fn free_cluster_ip(cidr: (Ipv4Addr, u8), used: &[String], seed: u32) -> Option<String> {
    let (network, prefix) = cidr;
    let size = 1u64 << (32 - u32::from(prefix));
    if size < 4 {
        return None;
    }
    let base = u32::from(network);
    // Offsets 2 .. size-2: the network, the kubernetes Service and the broadcast are taken.
    let usable = size - 3;
    (0..usable.min(1 << 20)).find_map(|i| {
        let offset = 2 + (u64::from(seed) + i) % usable;
        let ip = Ipv4Addr::from(base + offset as u32).to_string();
        (!used.contains(&ip)).then_some(ip)
    })
}

/// A service range as kube-apiserver's `--service-cluster-ip-range` gives it (its first,
/// IPv4 block: `10.96.0.0/12`).
pub fn parse_service_range(flag: &str) -> Option<(Ipv4Addr, u8)> {
    let (address, prefix) = flag.split(',').next()?.trim().split_once('/')?;
    let prefix: u8 = prefix.parse().ok().filter(|p| (1..=30).contains(p))?;
    let network = u32::from(address.parse::<Ipv4Addr>().ok()?) & (u32::MAX << (32 - prefix));
    Some((Ipv4Addr::from(network), prefix))
}

/// The `default/kubernetes` Service's address: the first of the service range, as
/// kube-apiserver gives it (and [`free_cluster_ip`] never hands out).
pub fn kubernetes_service_ip(range: (Ipv4Addr, u8)) -> String {
    Ipv4Addr::from(u32::from(range.0) + 1).to_string()
}

/// Whether an address is of a service range.
pub fn in_range(range: (Ipv4Addr, u8), ip: &str) -> bool {
    let (network, prefix) = range;
    let mask = u32::MAX << (32 - u32::from(prefix));
    ip.parse::<Ipv4Addr>()
        .is_ok_and(|a| u32::from(a) & mask == u32::from(network))
}

/// The ports NodePort Services are given, kube-apiserver's default `--service-node-port-range`.
pub const NODE_PORT_RANGE: std::ops::RangeInclusive<i64> = 30000..=32767;

/// The node ports a Service holds.
pub fn node_ports_of(service: &Value) -> Vec<i64> {
    service["spec"]["ports"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["nodePort"].as_i64())
        .filter(|p| *p != 0)
        .collect()
}

/// The node port `old` gave the same port (by name, else by number and protocol).
pub fn node_port_for(old: &Value, port: &Value) -> Option<i64> {
    let protocol = |p: &Value| p["protocol"].as_str().unwrap_or("TCP").to_string();
    old["spec"]["ports"].as_array()?.iter().find(|o| {
        match port["name"].as_str().filter(|n| !n.is_empty()) {
            Some(name) => o["name"].as_str() == Some(name),
            None => o["port"] == port["port"] && protocol(o) == protocol(port),
        }
    })?["nodePort"]
        .as_i64()
        .filter(|p| *p != 0)
}

/// A node port of [`NODE_PORT_RANGE`] not in `used`, starting from `seed`.
pub fn free_node_port(used: &[i64], seed: u32) -> Option<i64> {
    let (low, high) = (*NODE_PORT_RANGE.start(), *NODE_PORT_RANGE.end());
    let size = high - low + 1;
    (0..size).find_map(|i| {
        let port = low + (i64::from(seed) + i) % size;
        (!used.contains(&port)).then_some(port)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_ports_are_free_ones_of_the_range_and_kept_by_port() {
        let port = free_node_port(&[], 7).unwrap();
        assert!(NODE_PORT_RANGE.contains(&port));
        assert_eq!(free_node_port(&[30007], 7), Some(30008));
        let all: Vec<i64> = NODE_PORT_RANGE.collect();
        assert_eq!(free_node_port(&all, 0), None);
        let old = json!({"spec": {"ports": [
            {"name": "http", "port": 80, "nodePort": 30080},
            {"port": 53, "protocol": "UDP", "nodePort": 30053}]}});
        assert_eq!(
            node_port_for(&old, &json!({"name": "http", "port": 8080})),
            Some(30080)
        );
        assert_eq!(
            node_port_for(&old, &json!({"port": 53, "protocol": "UDP"})),
            Some(30053)
        );
        assert_eq!(node_port_for(&old, &json!({"port": 53})), None);
        assert_eq!(node_ports_of(&old), [30080, 30053]);
    }

    #[test]
    fn a_new_pod_is_pending_with_its_spec_defaults() {
        let mut pod = json!({"spec": {"containers": [
            {"name": "a", "image": "nginx"},
            {"name": "b", "image": "registry.local:5000/app:1.2", "ports": [{"containerPort": 80}]},
        ]}});
        apply("", "pods", &mut pod, || None);
        assert_eq!(
            pod["status"],
            json!({"phase": "Pending", "qosClass": "BestEffort"})
        );
        let spec = &pod["spec"];
        assert_eq!(spec["restartPolicy"], "Always");
        assert_eq!(spec["dnsPolicy"], "ClusterFirst");
        assert_eq!(spec["serviceAccountName"], "default");
        assert_eq!(spec["terminationGracePeriodSeconds"], 30);
        assert_eq!(spec["containers"][0]["imagePullPolicy"], "Always");
        assert_eq!(spec["containers"][1]["imagePullPolicy"], "IfNotPresent");
        assert_eq!(spec["containers"][1]["ports"][0]["protocol"], "TCP");
        assert_eq!(
            spec["containers"][0]["terminationMessagePath"],
            "/dev/termination-log"
        );
        // What the client said stays.
        let mut pod = json!({"spec": {"restartPolicy": "Never", "containers": [
            {"name": "a", "image": "x:latest", "imagePullPolicy": "Never",
             "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]},
            "status": {"phase": "Running"}});
        apply("", "pods", &mut pod, || None);
        assert_eq!(pod["spec"]["restartPolicy"], "Never");
        assert_eq!(pod["spec"]["containers"][0]["imagePullPolicy"], "Never");
        assert_eq!(pod["status"]["phase"], "Running");
        // An empty string is unset, as Go's defaulters read it; no list appears as a null.
        let mut pod = json!({"spec": {"restartPolicy": "", "containers": [
            {"name": "a", "image": "x:1", "imagePullPolicy": ""}]}});
        apply("", "pods", &mut pod, || None);
        assert_eq!(pod["spec"]["restartPolicy"], "Always");
        assert_eq!(
            pod["spec"]["containers"][0]["imagePullPolicy"],
            "IfNotPresent"
        );
        assert_eq!(pod["spec"]["containers"][0].get("ports"), None);
        assert_eq!(pod["spec"].get("initContainers"), None);
    }

    #[test]
    fn a_pod_mounts_its_service_account_token_where_nothing_else_is() {
        let mut pod = json!({"spec": {
            "containers": [
                {"name": "app"},
                {"name": "own", "volumeMounts": [{"name": "mine", "mountPath": SERVICE_ACCOUNT_MOUNT}]},
            ],
            "initContainers": [{"name": "init", "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
            "volumes": [{"name": "data", "emptyDir": {}}],
        }});
        mount_service_account_token(&mut pod, "x7k2p");
        let spec = &pod["spec"];
        assert_eq!(spec["volumes"][1]["name"], "kube-api-access-x7k2p");
        assert_eq!(
            spec["volumes"][1]["projected"]["sources"][1]["configMap"]["name"],
            "kube-root-ca.crt"
        );
        assert_eq!(
            spec["containers"][0]["volumeMounts"][0]["name"],
            "kube-api-access-x7k2p"
        );
        assert_eq!(
            spec["containers"][1]["volumeMounts"]
                .as_array()
                .unwrap()
                .len(),
            1,
            "its own mount stays"
        );
        assert_eq!(
            spec["initContainers"][0]["volumeMounts"][1]["mountPath"],
            SERVICE_ACCOUNT_MOUNT
        );
        let mut all_taken = json!({"spec": {"containers": [{"name": "own", "volumeMounts": [{"name": "mine", "mountPath": SERVICE_ACCOUNT_MOUNT}]}]}});
        mount_service_account_token(&mut all_taken, "x7k2p");
        assert!(
            all_taken["spec"].get("volumes").is_none(),
            "no volume nobody mounts"
        );
    }

    #[test]
    fn qos_classes() {
        let spec = |resources: Value| json!({"containers": [{"resources": resources}]});
        assert_eq!(qos_class(&spec(json!({}))), "BestEffort");
        assert_eq!(
            qos_class(&spec(json!({"requests": {"cpu": "1"}}))),
            "Burstable"
        );
        assert_eq!(
            qos_class(&spec(json!({"limits": {"cpu": "1", "memory": "1Gi"}}))),
            "Guaranteed"
        );
    }

    #[test]
    fn a_service_gets_its_type_ports_and_a_cluster_ip() {
        let mut service =
            json!({"spec": {"ports": [{"port": 80}, {"port": 443, "targetPort": "https"}]}});
        apply("", "services", &mut service, || Some("10.96.4.7".into()));
        let spec = &service["spec"];
        assert_eq!(spec["type"], "ClusterIP");
        assert_eq!(spec["clusterIP"], "10.96.4.7");
        assert_eq!(spec["clusterIPs"], json!(["10.96.4.7"]));
        assert_eq!(
            spec["ports"][0],
            json!({"port": 80, "protocol": "TCP", "targetPort": 80})
        );
        assert_eq!(spec["ports"][1]["targetPort"], "https");
        assert_eq!(spec["ipFamilies"], json!(["IPv4"]));
        assert_eq!(service["status"], json!({"loadBalancer": {}}));
        // A headless Service keeps None and gets no address.
        let mut headless = json!({"spec": {"clusterIP": "None"}});
        apply("", "services", &mut headless, || {
            panic!("no address for a headless Service")
        });
        assert_eq!(headless["spec"]["clusterIPs"], Value::Null);
    }

    #[test]
    fn workloads_get_their_spec_and_template_defaults() {
        let mut deployment = json!({"spec": {"template": {"spec": {"containers": [{"name": "a", "image": "a:1"}]}}}});
        apply("apps", "deployments", &mut deployment, || None);
        assert_eq!(deployment["spec"]["replicas"], 1);
        assert_eq!(
            deployment["spec"]["strategy"]["rollingUpdate"]["maxSurge"],
            "25%"
        );
        assert_eq!(
            deployment["spec"]["template"]["spec"]["restartPolicy"],
            "Always"
        );
        let mut job =
            json!({"spec": {"template": {"spec": {"restartPolicy": "Never", "containers": []}}}});
        apply("batch", "jobs", &mut job, || None);
        assert_eq!(job["spec"]["backoffLimit"], 6);
        assert_eq!(job["spec"]["template"]["spec"]["restartPolicy"], "Never");
    }

    #[test]
    fn kinds_without_a_spec_are_left_as_they_came() {
        for (group, plural) in [
            ("", "configmaps"),
            ("", "secrets"),
            ("apps", "controllerrevisions"),
        ] {
            let mut object = json!({"metadata": {"name": "a"}, "data": {"k": "v"}});
            apply(group, plural, &mut object, || None);
            assert_eq!(
                object,
                json!({"metadata": {"name": "a"}, "data": {"k": "v"}}),
                "{plural}"
            );
        }
    }

    #[test]
    fn cluster_ips_are_free_addresses_of_the_range() {
        let cidr = (Ipv4Addr::new(10, 96, 0, 0), 30);
        // A /30 has one address beside the network, the kubernetes Service and the broadcast.
        assert_eq!(free_cluster_ip(cidr, &[], 7), Some("10.96.0.2".into()));
        assert_eq!(free_cluster_ip(cidr, &["10.96.0.2".into()], 7), None);
        let wide = free_cluster_ip(SERVICE_CIDR, &[], 12345).unwrap();
        assert!(wide.starts_with("10.") && wide != "10.96.0.1", "{wide}");
    }

    #[test]
    fn a_service_range_is_read_as_kube_apiserver_reads_its_flag() {
        let capd = parse_service_range("10.128.0.0/12").unwrap();
        assert_eq!(capd, (Ipv4Addr::new(10, 128, 0, 0), 12));
        assert_eq!(
            parse_service_range("10.96.5.0/12,fd00::/108"),
            Some(SERVICE_CIDR),
            "the first block, its host bits cleared"
        );
        for bad in [
            "",
            "10.96.0.0",
            "10.96.0.0/0",
            "10.96.0.0/31",
            "fd00::/108",
            "x/12",
        ] {
            assert_eq!(parse_service_range(bad), None, "{bad:?}");
        }
        assert_eq!(kubernetes_service_ip(capd), "10.128.0.1");
        assert!(in_range(capd, "10.128.0.10"));
        assert!(in_range(capd, "10.143.255.254"));
        assert!(!in_range(capd, "10.144.0.1"));
        assert!(!in_range(capd, "10.96.0.10"));
        assert!(!in_range(capd, "not an address"));
    }
}
