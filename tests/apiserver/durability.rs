//! The embedded store acknowledges a write only once it is on disk: a management cluster killed
//! with SIGKILL in the middle of many concurrent writes comes back with every write it
//! acknowledged.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::common::management::Management;
use capictl::management::StateDir;

/// Writes in flight when the server is killed.
const IN_FLIGHT: usize = 32;
/// Acknowledged writes to wait for before the kill.
const BEFORE_KILL: usize = 400;

async fn client(m: &Management) -> kube::Client {
    let config = kube::config::Kubeconfig::read_from(m.kubeconfig()).unwrap();
    let config =
        kube::Config::from_custom_kubeconfig(config, &kube::config::KubeConfigOptions::default())
            .await
            .unwrap();
    kube::Client::try_from(config).unwrap()
}

#[test]
fn no_acknowledged_write_is_lost_when_the_server_is_killed_mid_write() {
    capictl::install_crypto_provider();
    let m = Management::up();
    let state = StateDir::new(Some(m.state().into()));
    let pid = state.running().expect("the server runs").pid as i32;
    let runtime = tokio::runtime::Runtime::new().unwrap();
    // Names whose create, and whose update, the server acknowledged.
    let created = Arc::new(Mutex::new(Vec::new()));
    let updated = Arc::new(Mutex::new(Vec::new()));
    let killed = AtomicBool::new(false);
    runtime.block_on(async {
        let api: Api<ConfigMap> = Api::namespaced(client(&m).await, "default");
        // No new writes start once the server is killed; those in flight end with errors.
        let writes = futures::stream::iter(0..)
            .take_while(|_| futures::future::ready(!killed.load(Ordering::SeqCst)))
            .map(|i| {
                let (api, created, updated) = (api.clone(), created.clone(), updated.clone());
                async move {
                    let name = format!("cm-{i}");
                    let cm: ConfigMap = serde_json::from_value(
                        json!({"metadata": {"name": name}, "data": {"step": "created"}}),
                    )
                    .unwrap();
                    if api.create(&PostParams::default(), &cm).await.is_err() {
                        return;
                    }
                    created.lock().unwrap().push(name.clone());
                    let patch = json!({"data": {"step": "updated"}});
                    let patched = api
                        .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                        .await;
                    if patched.is_ok() {
                        updated.lock().unwrap().push(name);
                    }
                }
            })
            .buffer_unordered(IN_FLIGHT)
            .collect::<()>();
        let killer = async {
            while created.lock().unwrap().len() < BEFORE_KILL {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            // SIGKILL: no shutdown, no flush; whatever was in flight is cut off.
            assert_eq!(unsafe { libc::kill(pid, libc::SIGKILL) }, 0);
            killed.store(true, Ordering::SeqCst);
        };
        tokio::time::timeout(
            Duration::from_secs(120),
            futures::future::join(writes, killer),
        )
        .await
        .expect("the writes end once the server is killed");
    });
    let (created, updated) = (
        created.lock().unwrap().clone(),
        updated.lock().unwrap().clone(),
    );
    assert!(created.len() >= BEFORE_KILL, "{} created", created.len());

    m.start();
    let stored = runtime.block_on(async {
        let api: Api<ConfigMap> = Api::namespaced(client(&m).await, "default");
        api.list(&ListParams::default()).await.unwrap().items
    });
    let step_of = |name: &str| -> Option<String> {
        stored
            .iter()
            .find(|cm| cm.metadata.name.as_deref() == Some(name))
            .and_then(|cm| cm.data.as_ref()?.get("step").cloned())
    };
    for name in &created {
        assert!(
            step_of(name).is_some(),
            "acknowledged create of {name} was lost"
        );
    }
    for name in &updated {
        assert_eq!(
            step_of(name).as_deref(),
            Some("updated"),
            "acknowledged update of {name} was lost"
        );
    }
    // Writes cut off before their answer may or may not have landed; nothing else appears.
    let written = stored
        .iter()
        .filter(|cm| {
            cm.metadata
                .name
                .as_deref()
                .is_some_and(|n| n.starts_with("cm-"))
        })
        .count();
    assert!(written <= created.len() + IN_FLIGHT, "{written} stored");
}
