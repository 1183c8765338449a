//! The MachineHealthCheck controller.

use kube::ResourceExt;
use kube::api::{Api, ListParams};
use serde_json::json;

use capictl::api::Machine;

use crate::common::fixtures::{available_cluster, machine_health_check, node_not_ready};
use crate::common::lifecycle::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_that_goes_not_ready_gets_its_machine_replaced() {
    let client = available_cluster(2).await;
    apply(
        &client,
        machine_health_check("c1", "md-0-health", json!({"pool": "md-0"}), 1),
    )
    .await;
    let machines: Api<Machine> = Api::namespaced(client.clone(), NS);
    let workers = ListParams::default().labels("pool=md-0");
    let victim = until("both workers have their Nodes", 20, async || {
        let list = machines.list(&workers).await.ok()?.items;
        (list.len() == 2 && list.iter().all(machine_available)).then(|| list[0].name_any())
    })
    .await;
    node_not_ready(&workload(&client, "c1").await, &victim).await;
    until("the unhealthy Machine is replaced", 60, async || {
        let list = machines.list(&workers).await.ok()?.items;
        let healthy = list.iter().filter(|m| machine_available(m)).count();
        (!list.iter().any(|m| m.name_any() == victim) && healthy == 2).then_some(())
    })
    .await;
}
