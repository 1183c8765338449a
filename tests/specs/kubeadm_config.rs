//! The KubeadmConfig controller (the kubeadm bootstrap provider).

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::ResourceExt;
use kube::api::{Api, ListParams};

use capictl::api::{KubeadmConfig, Machine};

use crate::common::fixtures::kubeadm_cluster;
use crate::common::lifecycle::*;

const CONTROL_PLANE: &str = "cluster.x-k8s.io/control-plane";

fn bootstrap_data(secret: &Secret) -> String {
    String::from_utf8(secret.data.as_ref().unwrap()["value"].0.clone()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_machine_runs_kubeadm_init_and_the_others_join_with_a_token() {
    let client = kubeadm_cluster(3, "v1.28.13").await;
    let machines: Api<Machine> = Api::namespaced(client.clone(), NS);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NS);
    let all = machines.list(&ListParams::default()).await.unwrap().items;
    assert_eq!(all.len(), 5, "three control-plane Machines and two workers");

    // The cluster's certificates and the admin kubeconfig, kept as upstream keeps them.
    for purpose in ["ca", "etcd", "proxy", "sa", "kubeconfig"] {
        let s = secrets.get(&format!("k1-{purpose}")).await.unwrap();
        assert_eq!(s.type_.as_deref(), Some("cluster.x-k8s.io/secret"));
    }
    // Bootstrap data: exactly one Machine ran `kubeadm init`, the others joined with a token
    // that exists in the workload cluster.
    let mut inits = 0;
    let mut tokens = BTreeSet::new();
    for m in &all {
        let name = m.spec.bootstrap.data_secret_name.clone().unwrap();
        let data = bootstrap_data(&secrets.get(&name).await.unwrap());
        assert!(
            data.starts_with("## template: jinja\n#cloud-config"),
            "{data}"
        );
        let control_plane = m.labels().contains_key(CONTROL_PLANE);
        assert_eq!(
            data.contains("/etc/kubernetes/pki/ca.key"),
            control_plane,
            "only control-plane Machines get the CA key"
        );
        let cloud_config: serde_json::Value = capictl::yaml::from_str(&data).unwrap();
        let file = |path: &str| -> Option<serde_json::Value> {
            let f = cloud_config["write_files"]
                .as_array()?
                .iter()
                .find(|f| f["path"] == path)?;
            capictl::yaml::from_multiple::<serde_json::Value>(f["content"].as_str()?)
                .ok()?
                .into_iter()
                .next()
        };
        // kubeadm runs from runcmd and leaves the sentinel the infrastructure provider waits for.
        let runcmd = cloud_config["runcmd"].as_array().unwrap();
        let kubeadm = if file("/run/kubeadm/kubeadm.yaml").is_some() {
            "kubeadm init --config /run/kubeadm/kubeadm.yaml"
        } else {
            "kubeadm join --config /run/kubeadm/kubeadm-join-config.yaml"
        };
        assert!(
            runcmd.iter().any(|c| c.as_str()
                == Some(&format!(
                    "{kubeadm} && echo success > /run/cluster-api/bootstrap-success.complete"
                ))),
            "{runcmd:?}"
        );
        if let Some(init) = file("/run/kubeadm/kubeadm.yaml") {
            inits += 1;
            assert!(control_plane);
            assert_eq!(init["kind"], "ClusterConfiguration");
            assert_eq!(init["kubernetesVersion"], "v1.28.13");
            assert_eq!(
                init["apiVersion"], "kubeadm.k8s.io/v1beta3",
                "kubeadm 1.28 reads v1beta3"
            );
            assert_eq!(
                init["controlPlaneEndpoint"]
                    .as_str()
                    .map(|e| e.contains(':')),
                Some(true)
            );
        } else {
            let join = file("/run/kubeadm/kubeadm-join-config.yaml")
                .unwrap_or_else(|| panic!("neither init nor join in {data}"));
            assert_eq!(join["kind"], "JoinConfiguration");
            assert_eq!(join["apiVersion"], "kubeadm.k8s.io/v1beta3");
            assert_eq!(join.get("controlPlane").is_some(), control_plane);
            let token = join["discovery"]["bootstrapToken"]["token"]
                .as_str()
                .unwrap();
            tokens.insert(token.split('.').next().unwrap().to_string());
            // Kept in the config's spec, as upstream keeps it, to be refreshed until the Node joins.
            let config = Api::<KubeadmConfig>::namespaced(client.clone(), NS)
                .get(&m.spec.bootstrap.config_ref.as_ref().unwrap().name)
                .await
                .unwrap();
            let kept = config.spec.join_configuration.unwrap().discovery.unwrap();
            assert_eq!(kept.bootstrap_token.unwrap().token.as_deref(), Some(token));
        }
    }
    assert_eq!(inits, 1, "one Machine initializes the cluster");
    let workload_secrets: Api<Secret> =
        Api::namespaced(workload(&client, "k1").await, "kube-system");
    for id in &tokens {
        workload_secrets
            .get(&format!("bootstrap-token-{id}"))
            .await
            .unwrap();
    }
    let lock: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    until("the init lock is released", 30, async || {
        lock.get_opt("k1-lock")
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await;
    let configs: Api<KubeadmConfig> = Api::namespaced(client.clone(), NS);
    for c in configs.list(&ListParams::default()).await.unwrap().items {
        let s = c.status.unwrap();
        assert!(condition_true(s.conditions.as_ref(), "DataSecretAvailable"));
    }
}
