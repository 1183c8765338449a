//! What `kubeadm init` uploads into the new cluster, in kubeadm's order: the kubelet
//! configuration, kubeadm's RBAC, `kube-public/cluster-info`, bootstrap tokens, the CoreDNS
//! and kube-proxy add-ons (objects only: nothing here runs their Pods, but the control plane
//! provider updates them on upgrades), and `kube-system/kubeadm-config` last, because its
//! existence tells the control plane provider the cluster is initialized.

use std::fmt::Debug;

use kube::api::{Api, PostParams};
use kube::{Client, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::node::{NodeError, Result};

/// kubeadm's default Corefile.
pub fn corefile(dns_domain: &str) -> String {
    format!(
        ".:53 {{\n    errors\n    health {{\n       lameduck 5s\n    }}\n    ready\n    kubernetes {dns_domain} in-addr.arpa ip6.arpa {{\n       pods insecure\n       fallthrough in-addr.arpa ip6.arpa\n       ttl 30\n    }}\n    prometheus :9153\n    forward . /etc/resolv.conf {{\n       max_concurrent 1000\n    }}\n    cache 30\n    loop\n    reload\n    loadbalance\n}}\n"
    )
}

/// Everything to upload (but kubeadm-config), as `(kind, namespace, object)`.
pub struct Inputs<'a> {
    pub cluster: &'a Value,
    pub endpoint: &'a str,
    pub ca_cert: &'a str,
    pub kubernetes_version: &'a str,
    pub bootstrap_tokens: &'a [Value],
    pub dns_ip: String,
}

fn binding(name: &str, role_kind: &str, role: &str, subjects: Value) -> Value {
    json!({
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role},
        "subjects": subjects,
    })
}

fn group(name: &str) -> Value {
    json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": name})
}

/// Creates `object` through `api` unless an object of that name exists (kubeadm's "create or
/// keep").
async fn create<K>(api: Api<K>, object: Value) -> Result<()>
where
    K: Resource<DynamicType = ()> + Clone + Debug + Serialize + DeserializeOwned,
{
    let typed: K = serde_json::from_value(object)
        .map_err(|e| NodeError::Failed(format!("building a {}: {e}", K::kind(&()))))?;
    match api.create(&PostParams::default(), &typed).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Uploads what a kubeadm cluster has, but kubeadm-config.
pub async fn everything_but_kubeadm_config(client: &Client, inputs: &Inputs<'_>) -> Result<()> {
    use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
    use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service, ServiceAccount};
    use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};

    let say = |s: &str| println!("{s}");
    say(
        "[upload-config] Storing the kubelet configuration in ConfigMap \"kubelet-config\" in namespace kube-system",
    );
    let dns_domain = inputs.cluster["networking"]["dnsDomain"]
        .as_str()
        .unwrap_or("cluster.local");
    let kubelet_config = format!(
        "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ncgroupDriver: systemd\nclusterDNS:\n- {}\nclusterDomain: {dns_domain}\nrotateCertificates: true\nstaticPodPath: /etc/kubernetes/manifests\n",
        inputs.dns_ip
    );
    create(
        Api::<ConfigMap>::namespaced(client.clone(), "kube-system"),
        json!({"metadata": {"name": "kubelet-config"}, "data": {"kubelet": kubelet_config}}),
    )
    .await?;
    create(Api::<Role>::namespaced(client.clone(), "kube-system"), json!({
        "metadata": {"name": "kubeadm:kubelet-config"},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["kubelet-config"], "verbs": ["get"]}],
    })).await?;
    create(
        Api::<RoleBinding>::namespaced(client.clone(), "kube-system"),
        binding(
            "kubeadm:kubelet-config",
            "Role",
            "kubeadm:kubelet-config",
            json!([
                group("system:nodes"),
                group("system:bootstrappers:kubeadm:default-node-token")
            ]),
        ),
    )
    .await?;
    create(Api::<Role>::namespaced(client.clone(), "kube-system"), json!({
        "metadata": {"name": "kubeadm:nodes-kubeadm-config"},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["kubeadm-config"], "verbs": ["get"]}],
    })).await?;
    create(
        Api::<RoleBinding>::namespaced(client.clone(), "kube-system"),
        binding(
            "kubeadm:nodes-kubeadm-config",
            "Role",
            "kubeadm:nodes-kubeadm-config",
            json!([
                group("system:bootstrappers:kubeadm:default-node-token"),
                group("system:nodes")
            ]),
        ),
    )
    .await?;

    say("[bootstrap-token] Configuring bootstrap tokens, cluster-info ConfigMap, RBAC Roles");
    create(
        Api::<ClusterRole>::all(client.clone()),
        json!({
            "metadata": {"name": "kubeadm:get-nodes"},
            "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}],
        }),
    )
    .await?;
    let bootstrappers = json!([group("system:bootstrappers:kubeadm:default-node-token")]);
    for (name, role, subjects) in [
        (
            "kubeadm:get-nodes",
            "kubeadm:get-nodes",
            bootstrappers.clone(),
        ),
        (
            "kubeadm:kubelet-bootstrap",
            "system:node-bootstrapper",
            bootstrappers.clone(),
        ),
        (
            "kubeadm:node-autoapprove-bootstrap",
            "system:certificates.k8s.io:certificatesigningrequests:nodeclient",
            bootstrappers.clone(),
        ),
        (
            "kubeadm:node-autoapprove-certificate-rotation",
            "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient",
            json!([group("system:nodes")]),
        ),
        (
            "kubeadm:cluster-admins",
            "cluster-admin",
            json!([group("kubeadm:cluster-admins")]),
        ),
    ] {
        create(
            Api::<ClusterRoleBinding>::all(client.clone()),
            binding(name, "ClusterRole", role, subjects),
        )
        .await?;
    }
    let cluster_info = crate::node::kubeadm::pki::kubeconfig_yaml_without_user(
        &format!("https://{}", inputs.endpoint),
        inputs.ca_cert,
    )?;
    create(
        Api::<ConfigMap>::namespaced(client.clone(), "kube-public"),
        json!({"metadata": {"name": "cluster-info"}, "data": {"kubeconfig": cluster_info}}),
    )
    .await?;
    create(Api::<Role>::namespaced(client.clone(), "kube-public"), json!({
        "metadata": {"name": "kubeadm:bootstrap-signer-clusterinfo"},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["cluster-info"], "verbs": ["get"]}],
    })).await?;
    create(Api::<RoleBinding>::namespaced(client.clone(), "kube-public"), binding("kubeadm:bootstrap-signer-clusterinfo", "Role", "kubeadm:bootstrap-signer-clusterinfo", json!([{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "system:anonymous"}]))).await?;
    for token in inputs.bootstrap_tokens {
        let Some((id, secret)) = token["token"].as_str().and_then(|t| t.split_once('.')) else {
            continue;
        };
        let usages: Vec<String> = token["usages"]
            .as_array()
            .map(|u| {
                u.iter()
                    .filter_map(|u| u.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_else(|| vec!["signing".into(), "authentication".into()]);
        let mut data = json!({"token-id": id, "token-secret": secret});
        for usage in usages {
            data[format!("usage-bootstrap-{usage}")] = json!("true");
        }
        let groups: Vec<String> = token["groups"]
            .as_array()
            .map(|g| {
                g.iter()
                    .filter_map(|g| g.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_else(|| vec!["system:bootstrappers:kubeadm:default-node-token".into()]);
        data["auth-extra-groups"] = json!(groups.join(","));
        create(
            Api::<Secret>::namespaced(client.clone(), "kube-system"),
            json!({
                "metadata": {"name": format!("bootstrap-token-{id}")},
                "type": "bootstrap.kubernetes.io/token",
                "stringData": data,
            }),
        )
        .await?;
    }

    let repository = inputs.cluster["imageRepository"]
        .as_str()
        .unwrap_or("registry.k8s.io");
    let minor = crate::api::common::kubernetes_version(inputs.kubernetes_version)
        .map(|(_, m, _)| m)
        .unwrap_or(28);
    say("[addons] Applied essential addon: CoreDNS");
    create(
        Api::<ServiceAccount>::namespaced(client.clone(), "kube-system"),
        json!({"metadata": {"name": "coredns"}}),
    )
    .await?;
    create(
        Api::<ConfigMap>::namespaced(client.clone(), "kube-system"),
        json!({"metadata": {"name": "coredns"}, "data": {"Corefile": corefile(dns_domain)}}),
    )
    .await?;
    let dns_labels = json!({"k8s-app": "kube-dns"});
    create(Api::<Deployment>::namespaced(client.clone(), "kube-system"), json!({
        "metadata": {"name": "coredns", "labels": dns_labels},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": dns_labels},
            "template": {
                "metadata": {"labels": dns_labels},
                "spec": {
                    "serviceAccountName": "coredns",
                    "priorityClassName": "system-cluster-critical",
                    "containers": [{"name": "coredns", "image": format!("{repository}/coredns/coredns:{}", crate::kubeadm::coredns_tag(minor)), "args": ["-conf", "/etc/coredns/Corefile"], "volumeMounts": [{"name": "config-volume", "mountPath": "/etc/coredns", "readOnly": true}]}],
                    "volumes": [{"name": "config-volume", "configMap": {"name": "coredns", "items": [{"key": "Corefile", "path": "Corefile"}]}}],
                },
            },
        },
    })).await?;
    create(Api::<Service>::namespaced(client.clone(), "kube-system"), json!({
        "metadata": {"name": "kube-dns", "labels": {"k8s-app": "kube-dns", "kubernetes.io/name": "CoreDNS"}},
        "spec": {"clusterIP": inputs.dns_ip, "selector": dns_labels, "ports": [{"name": "dns", "port": 53, "protocol": "UDP", "targetPort": 53}, {"name": "dns-tcp", "port": 53, "protocol": "TCP", "targetPort": 53}]},
    })).await?;

    say("[addons] Applied essential addon: kube-proxy");
    create(
        Api::<ServiceAccount>::namespaced(client.clone(), "kube-system"),
        json!({"metadata": {"name": "kube-proxy"}}),
    )
    .await?;
    let proxy_kubeconfig = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- cluster:\n    certificate-authority: /var/run/secrets/kubernetes.io/serviceaccount/ca.crt\n    server: https://{}\n  name: default\ncontexts:\n- context:\n    cluster: default\n    namespace: default\n    user: default\n  name: default\ncurrent-context: default\nusers:\n- name: default\n  user:\n    tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token\n",
        inputs.endpoint
    );
    create(Api::<ConfigMap>::namespaced(client.clone(), "kube-system"), json!({
        "metadata": {"name": "kube-proxy", "labels": {"app": "kube-proxy"}},
        "data": {"config.conf": "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nconntrack:\n  maxPerCore: 0\nmode: iptables\n", "kubeconfig.conf": proxy_kubeconfig},
    })).await?;
    let proxy_labels = json!({"k8s-app": "kube-proxy"});
    create(Api::<DaemonSet>::namespaced(client.clone(), "kube-system"), json!({
        "metadata": {"name": "kube-proxy", "labels": proxy_labels},
        "spec": {
            "selector": {"matchLabels": proxy_labels},
            "template": {
                "metadata": {"labels": proxy_labels},
                "spec": {
                    "serviceAccountName": "kube-proxy",
                    "hostNetwork": true,
                    "priorityClassName": "system-node-critical",
                    "containers": [{"name": "kube-proxy", "image": format!("{repository}/kube-proxy:{}", inputs.kubernetes_version), "command": ["/usr/local/bin/kube-proxy", "--config=/var/lib/kube-proxy/config.conf", "--hostname-override=$(NODE_NAME)"]}],
                },
            },
        },
    })).await?;
    Ok(())
}

/// Stores the ClusterConfiguration as `kube-system/kubeadm-config` (replacing it on a second
/// run, so it says what this run was given).
pub async fn kubeadm_config(client: &Client, cluster: &Value) -> Result<()> {
    use k8s_openapi::api::core::v1::ConfigMap;
    println!(
        "[upload-config] Storing the configuration used in ConfigMap \"kubeadm-config\" in the \"kube-system\" Namespace"
    );
    let text = crate::yaml::to_string(cluster)
        .map_err(|e| NodeError::Failed(format!("the ClusterConfiguration: {e}")))?;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "kube-system");
    let mut config: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "kubeadm-config", "namespace": "kube-system"},
        "data": {"ClusterConfiguration": text},
    }))
    .expect("a ConfigMap");
    match api.create(&PostParams::default(), &config).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => {
            let current = api.get("kubeadm-config").await?;
            config.metadata.resource_version = current.metadata.resource_version;
            api.replace("kubeadm-config", &PostParams::default(), &config)
                .await?;
            Ok(())
        }
        Err(e) => Err(e.into()),
    }
}
