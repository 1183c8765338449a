//! Workloads in the in-memory provider's clusters: the scheduler, the ReplicaSet and
//! Deployment controllers and KWOK-style kubelets run Pods without processes, so Cluster API's
//! drain meets real Deployments and disruption budgets.

use std::collections::BTreeSet;

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::{Endpoints, Event, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

use capictl::api::Machine;

use crate::common::fixtures::{available_cluster, web_budget};
use crate::common::lifecycle::*;

/// The web Pods that run: name → (node, Pod IP).
async fn running_web_pods(pods: &Api<Pod>) -> Vec<(String, String, String)> {
    pods.list(&ListParams::default().labels("app=web"))
        .await
        .map(|l| l.items)
        .unwrap_or_default()
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter_map(|p| {
            let status = p.status.as_ref()?;
            let ready = status
                .conditions
                .iter()
                .flatten()
                .any(|c| c.type_ == "Ready" && c.status == "True");
            (status.phase.as_deref() == Some("Running") && ready).then(|| {
                (
                    p.name_any(),
                    p.spec
                        .as_ref()
                        .unwrap()
                        .node_name
                        .clone()
                        .unwrap_or_default(),
                    status.pod_ip.clone().unwrap_or_default(),
                )
            })
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deployment_spreads_rolls_and_is_drained_within_its_budget() {
    let client = available_cluster(3).await;
    let workload_client = workload(&client, "c1").await;
    let deployments: Api<Deployment> = Api::namespaced(workload_client.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(workload_client.clone(), "default");
    let web: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": "nginx:1.27", "resources": {"requests": {"cpu": "100m"}}}]},
            },
        },
    }))
    .unwrap();
    deployments
        .create(&PostParams::default(), &web)
        .await
        .unwrap();

    // Three Pods, Running with addresses, one on each worker and none on the control plane.
    let running = until("3 web Pods run", 30, async || {
        let r = running_web_pods(&pods).await;
        (r.len() == 3).then_some(r)
    })
    .await;
    let nodes: BTreeSet<&str> = running.iter().map(|(_, n, _)| n.as_str()).collect();
    assert_eq!(nodes.len(), 3, "spread over the workers: {running:?}");
    assert!(!nodes.contains("c1-cp-0"), "the control plane is tainted");
    assert!(running.iter().all(|(_, _, ip)| ip.starts_with("10.244.")));
    let d = until("the Deployment is available", 20, async || {
        let d = deployments.get("web").await.ok()?;
        (d.status.as_ref()?.available_replicas == Some(3)).then_some(d)
    })
    .await;
    let progressing = d
        .status
        .unwrap()
        .conditions
        .unwrap()
        .into_iter()
        .find(|c| c.type_.as_deref() == Some("Progressing"))
        .unwrap();
    assert_eq!(
        progressing.reason.as_deref(),
        Some("NewReplicaSetAvailable")
    );
    // kubectl's Pod table comes from the server: READY, STATUS, RESTARTS, and with -o wide
    // the IP and the Node.
    let table: serde_json::Value = workload_client
        .request(
            http::Request::get("/api/v1/namespaces/default/pods?labelSelector=app%3Dweb")
                .header("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
                .body(Vec::new())
                .unwrap(),
        )
        .await
        .unwrap();
    let columns: Vec<&str> = table["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        columns,
        [
            "Name",
            "Ready",
            "Status",
            "Restarts",
            "Age",
            "IP",
            "Node",
            "Nominated Node",
            "Readiness Gates"
        ]
    );
    let cells = &table["rows"][0]["cells"];
    assert_eq!(
        (&cells[1], &cells[2], &cells[3]),
        (&json!("1/1"), &json!("Running"), &json!("0"))
    );
    assert!(cells[5].as_str().unwrap().starts_with("10.244."), "{cells}");
    let pod = pods.get(&running[0].0).await.unwrap();
    assert_eq!(pod.status.unwrap().qos_class.as_deref(), Some("Burstable"));

    // A Pod no Node takes is told why, as kube-scheduler tells it.
    pods.create(
        &PostParams::default(),
        &serde_json::from_value(json!({
            "metadata": {"name": "gpu"},
            "spec": {"nodeSelector": {"gpu": "yes"}, "containers": [{"name": "c", "image": "cuda"}]},
        }))
        .unwrap(),
    )
    .await
    .unwrap();
    let message = until("the gpu Pod is unschedulable", 20, async || {
        let p = pods.get("gpu").await.ok()?;
        let c = p
            .status?
            .conditions?
            .into_iter()
            .find(|c| c.type_ == "PodScheduled")?;
        (c.status == "False").then_some(c.message?)
    })
    .await;
    assert_eq!(
        message,
        "0/4 nodes are available: 1 node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }, 3 node(s) didn't match Pod's node affinity/selector. preemption: 0/4 nodes are available: 4 Preemption is not helpful for scheduling."
    );
    // The Event is recorded after the condition, as kube-scheduler's event broadcaster does.
    let events: Api<Event> = Api::namespaced(workload_client.clone(), "default");
    until(
        "a FailedScheduling Event from default-scheduler",
        20,
        async || {
            let failed = events.list(&ListParams::default()).await.ok()?.items;
            failed
                .iter()
                .any(|e| {
                    e.reason.as_deref() == Some("FailedScheduling")
                        && e.involved_object.name.as_deref() == Some("gpu")
                        && e.source.as_ref().and_then(|s| s.component.as_deref())
                            == Some("default-scheduler")
                })
                .then_some(())
        },
    )
    .await;

    // A new image rolls the Pods through a second ReplicaSet, the first kept at zero.
    deployments
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Strategic(json!({"spec": {"template": {"spec": {"containers": [{"name": "web", "image": "nginx:1.28"}]}}}})),
        )
        .await
        .unwrap();
    until("the rollout completes", 40, async || {
        let d = deployments.get("web").await.ok()?;
        let s = d.status?;
        let done = s.observed_generation == d.metadata.generation
            && s.updated_replicas == Some(3)
            && s.replicas == Some(3)
            && s.available_replicas == Some(3);
        done.then_some(())
    })
    .await;
    let sets: Api<ReplicaSet> = Api::namespaced(workload_client.clone(), "default");
    let mut revisions: Vec<(String, i32)> = sets
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .map(|rs| {
            (
                rs.annotations()["deployment.kubernetes.io/revision"].clone(),
                rs.spec.replicas.unwrap(),
            )
        })
        .collect();
    revisions.sort();
    assert_eq!(revisions, [("1".to_string(), 0), ("2".to_string(), 3)]);

    // A Service lists the Pods as its endpoints, in Endpoints and an EndpointSlice.
    let services: Api<Service> = Api::namespaced(workload_client.clone(), "default");
    services
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": "web"},
                "spec": {"selector": {"app": "web"}, "ports": [{"name": "http", "port": 80, "targetPort": 8080}]},
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    let endpoints: Api<Endpoints> = Api::namespaced(workload_client.clone(), "default");
    let ready_endpoints = async || -> usize {
        endpoints
            .get_opt("web")
            .await
            .ok()
            .flatten()
            .and_then(|e| e.subsets)
            .into_iter()
            .flatten()
            .map(|s| s.addresses.map_or(0, |a| a.len()))
            .sum()
    };
    until("the Service has 3 endpoints", 20, async || {
        (ready_endpoints().await == 3).then_some(())
    })
    .await;
    let slices: Api<EndpointSlice> = Api::namespaced(workload_client.clone(), "default");
    let slice = slices
        .list(&ListParams::default().labels("kubernetes.io/service-name=web"))
        .await
        .unwrap()
        .items
        .pop()
        .expect("an EndpointSlice for the Service");
    assert_eq!(slice.endpoints.map_or(0, |e| e.len()), 3);
    assert_eq!(slice.ports.unwrap()[0].port, Some(8080));

    // A DaemonSet runs a Pod on every worker; the control plane's taint keeps it off there.
    let daemons: Api<DaemonSet> = Api::namespaced(workload_client.clone(), "default");
    daemons
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": "agent"},
                "spec": {
                    "selector": {"matchLabels": {"app": "agent"}},
                    "template": {"metadata": {"labels": {"app": "agent"}}, "spec": {"containers": [{"name": "agent", "image": "agent:1"}]}},
                },
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    until("the DaemonSet is ready on the 3 workers", 20, async || {
        let s = daemons.get("agent").await.ok()?.status?;
        (s.desired_number_scheduled == 3 && s.number_ready == 3).then_some(())
    })
    .await;

    // A budget of 3 holds the drain of a worker: the Machine's Deleting condition names it.
    let budgets = web_budget(&workload_client, 3).await;
    until(
        "the disruption controller counts the budget",
        20,
        async || {
            let s = budgets.get("web").await.ok()?.status?;
            (s.expected_pods == Some(3)
                && s.current_healthy == Some(3)
                && s.disruptions_allowed == Some(0))
            .then_some(())
        },
    )
    .await;
    let running = until("3 web Pods of the new image run", 20, async || {
        let r = running_web_pods(&pods).await;
        (r.len() == 3).then_some(r)
    })
    .await;
    let drained = running[0].1.clone();
    let machines: Api<Machine> = Api::namespaced(client.clone(), NS);
    machines
        .delete(&drained, &DeleteParams::default())
        .await
        .unwrap();
    let held = until("the drain is held by the budget", 30, async || {
        let m = machines.get(&drained).await.ok()?;
        let deleting = m
            .status?
            .conditions?
            .into_iter()
            .find(|c| c.type_ == "Deleting")?;
        deleting
            .message
            .contains("The disruption budget web needs 3 healthy pods")
            .then_some(deleting)
    })
    .await;
    assert_eq!(held.reason, "DrainingNode");

    // Relaxed to 2, the Pod is evicted, its replacement runs on another worker, and the
    // Machine goes; the Deployment never had fewer than two Pods running.
    budgets
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"minAvailable": 2}})),
        )
        .await
        .unwrap();
    let (mut fewest, mut fewest_endpoints) = (3, 3);
    until("the drained Machine is gone", 60, async || {
        fewest = fewest.min(running_web_pods(&pods).await.len());
        fewest_endpoints = fewest_endpoints.min(ready_endpoints().await);
        machines
            .get_opt(&drained)
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await;
    assert!(
        fewest >= 2,
        "the budget kept two Pods running, saw {fewest}"
    );
    assert!(
        fewest_endpoints >= 2,
        "the Service kept two endpoints, saw {fewest_endpoints}"
    );
    let after = until("3 web Pods run again", 30, async || {
        let r = running_web_pods(&pods).await;
        (r.len() == 3).then_some(r)
    })
    .await;
    assert!(
        after.iter().all(|(_, node, _)| *node != drained),
        "none on the drained node: {after:?}"
    );
    // The DaemonSet follows the Nodes: its Pod on the drained node is going with it (the Pod
    // garbage collector takes it once the Node has been gone 40 s), and the replacement worker
    // gets one.
    until("the DaemonSet is on the 3 workers again", 40, async || {
        let agents: Vec<Pod> = pods
            .list(&ListParams::default().labels("app=agent"))
            .await
            .ok()?
            .items
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .collect();
        let nodes: BTreeSet<String> = agents
            .iter()
            .filter_map(|p| p.spec.as_ref()?.node_name.clone())
            .collect();
        (agents.len() == 3 && nodes.len() == 3 && !nodes.contains(&drained)).then_some(())
    })
    .await;
}

/// A StatefulSet's Pods have stable names and hostnames found through its headless Service,
/// roll to a new template and scale down from the highest ordinal; a CronJob runs the time it
/// missed at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stateful_set_and_a_cron_job_run_as_kube_runs_them() {
    let client = available_cluster(2).await;
    let workload_client = workload(&client, "c1").await;
    let services: Api<Service> = Api::namespaced(workload_client.clone(), "default");
    services
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": "db"},
                "spec": {"clusterIP": "None", "selector": {"app": "db"}, "ports": [{"port": 5432}]},
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    let sets: Api<StatefulSet> = Api::namespaced(workload_client.clone(), "default");
    let set: StatefulSet = serde_json::from_value(json!({
        "metadata": {"name": "db"},
        "spec": {
            "replicas": 3,
            "serviceName": "db",
            "selector": {"matchLabels": {"app": "db"}},
            "template": {
                "metadata": {"labels": {"app": "db"}},
                "spec": {"containers": [{"name": "db", "image": "postgres:16"}]},
            },
        },
    }))
    .unwrap();
    sets.create(&PostParams::default(), &set).await.unwrap();
    let pods: Api<Pod> = Api::namespaced(workload_client.clone(), "default");
    let members = async || -> Vec<Pod> {
        let list = pods
            .list(&ListParams::default().labels("app=db"))
            .await
            .unwrap();
        list.items
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .collect()
    };
    let status_of = async || sets.get("db").await.unwrap().status.unwrap_or_default();
    until("the StatefulSet's 3 Pods are ready", 30, async || {
        (status_of().await.ready_replicas == Some(3)).then_some(())
    })
    .await;
    let mut names: Vec<String> = members().await.iter().map(|p| p.name_any()).collect();
    names.sort();
    assert_eq!(names, ["db-0", "db-1", "db-2"]);
    let db1 = pods.get("db-1").await.unwrap();
    let spec = db1.spec.unwrap();
    assert_eq!(
        (spec.hostname.as_deref(), spec.subdomain.as_deref()),
        (Some("db-1"), Some("db"))
    );
    let endpoints: Api<Endpoints> = Api::namespaced(workload_client.clone(), "default");
    until("the headless Service names its peers", 20, async || {
        let e = endpoints.get("db").await.ok()?;
        let mut hostnames: Vec<String> = e
            .subsets?
            .into_iter()
            .flat_map(|s| s.addresses.unwrap_or_default())
            .filter_map(|a| a.hostname)
            .collect();
        hostnames.sort();
        (hostnames == ["db-0", "db-1", "db-2"]).then_some(())
    })
    .await;
    let first = status_of().await;
    assert_eq!(first.current_revision, first.update_revision);
    // A new image rolls every Pod onto the new revision, and it becomes the current one.
    sets.patch(
        "db",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"template": {"spec": {"containers": [{"name": "db", "image": "postgres:17"}]}}}})),
    )
    .await
    .unwrap();
    let rolled = until(
        "the StatefulSet rolls to its new template",
        60,
        async || {
            let s = status_of().await;
            (s.update_revision != first.update_revision
                && s.current_revision == s.update_revision
                && s.updated_replicas == Some(3)
                && s.ready_replicas == Some(3))
            .then_some(s)
        },
    )
    .await;
    for pod in members().await {
        assert_eq!(
            pod.labels().get("controller-revision-hash"),
            rolled.update_revision.as_ref(),
            "{}",
            pod.name_any()
        );
        assert_eq!(
            pod.spec.unwrap().containers[0].image.as_deref(),
            Some("postgres:17")
        );
    }
    // Scaled to one, the highest ordinals go and db-0 stays.
    sets.patch(
        "db",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 1}})),
    )
    .await
    .unwrap();
    until("the StatefulSet scales down to db-0", 30, async || {
        let names: Vec<String> = members().await.iter().map(|p| p.name_any()).collect();
        (names == ["db-0"]).then_some(())
    })
    .await;

    // A CronJob whose last run was three minutes ago runs the latest missed minute at once.
    let cron_jobs: Api<CronJob> = Api::namespaced(workload_client.clone(), "default");
    let cron_job: CronJob = serde_json::from_value(json!({
        "metadata": {"name": "tick"},
        "spec": {
            "schedule": "* * * * *",
            "jobTemplate": {"spec": {"template": {"spec": {
                "restartPolicy": "Never", "containers": [{"name": "tick", "image": "busybox"}]}}}},
        },
    }))
    .unwrap();
    cron_jobs
        .create(&PostParams::default(), &cron_job)
        .await
        .unwrap();
    let now = time::OffsetDateTime::now_utc();
    let earlier = (now - time::Duration::minutes(3))
        .replace_second(0)
        .unwrap()
        .replace_nanosecond(0)
        .unwrap();
    let rfc3339 = |t: time::OffsetDateTime| {
        t.format(&time::format_description::well_known::Rfc3339)
            .unwrap()
    };
    cron_jobs
        .patch_status(
            "tick",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"lastScheduleTime": rfc3339(earlier)}})),
        )
        .await
        .unwrap();
    let jobs: Api<Job> = Api::namespaced(workload_client.clone(), "default");
    let job = until("the CronJob runs its missed minute", 30, async || {
        jobs.list(&ListParams::default())
            .await
            .ok()?
            .items
            .into_iter()
            .next()
    })
    .await;
    let scheduled = job.annotations()["batch.kubernetes.io/cronjob-scheduled-timestamp"].clone();
    let scheduled_at =
        time::OffsetDateTime::parse(&scheduled, &time::format_description::well_known::Rfc3339)
            .unwrap();
    assert!(
        scheduled_at > earlier && scheduled_at <= now + time::Duration::minutes(1),
        "{scheduled}"
    );
    assert_eq!(
        job.name_any(),
        format!("tick-{}", scheduled_at.unix_timestamp() / 60)
    );
    assert_eq!(job.owner_references()[0].name, "tick");
    let status = until("the CronJob lists its active Job", 20, async || {
        let s = cron_jobs.get("tick").await.ok()?.status?;
        (s.active.as_ref()?.len() == 1).then_some(s)
    })
    .await;
    assert_eq!(
        status.active.unwrap()[0].name.as_deref(),
        Some(job.name_any().as_str())
    );
}

/// The workload cluster's kubeconfig, written to a file of its own for kubectl.
async fn workload_kubeconfig(client: &kube::Client, cluster: &str) -> std::path::PathBuf {
    let secrets: Api<k8s_openapi::api::core::v1::Secret> =
        Api::namespaced(client.clone(), "default");
    let secret = secrets.get(&format!("{cluster}-kubeconfig")).await.unwrap();
    let dir = std::env::temp_dir().join(format!("capictl-history-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("kubeconfig");
    std::fs::write(&path, &secret.data.unwrap()["value"].0).unwrap();
    path
}

/// kubectl's `rollout history` and `rollout undo` on DaemonSets and StatefulSets: each
/// template the controllers ran is a ControllerRevision, and an undo brings the previous one
/// back (renumbered as the newest, not copied).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_rolls_daemon_sets_and_stateful_sets_back_through_their_history() {
    let client = available_cluster(2).await;
    let workload_client = workload(&client, "c1").await;
    let kubeconfig = workload_kubeconfig(&client, "c1").await;
    let kubectl = |args: &[&str]| {
        let out = std::process::Command::new(crate::common::management::kubectl_binary())
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .args(args)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(
            out.status.success(),
            "kubectl {args:?}: {text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        text
    };
    let revisions: Api<k8s_openapi::api::apps::v1::ControllerRevision> =
        Api::namespaced(workload_client.clone(), "default");
    // name → (revision, image), of the revisions `owner` controls.
    let history_of = async |owner: &str| -> Vec<(i64, String)> {
        let mut out: Vec<(i64, String)> = revisions
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter(|r| r.owner_references().iter().any(|o| o.name == owner))
            .map(|r| {
                let image = r.data.0["spec"]["template"]["spec"]["containers"][0]["image"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                (r.revision.unwrap_or(0), image)
            })
            .collect();
        out.sort();
        out
    };
    let sets: Api<StatefulSet> = Api::namespaced(workload_client.clone(), "default");
    for (kind, app, image) in [
        ("StatefulSet", "db", "postgres:16"),
        ("DaemonSet", "agent", "agent:1"),
    ] {
        let resource = match kind {
            "StatefulSet" => kube::api::ApiResource::erase::<StatefulSet>(&()),
            _ => kube::api::ApiResource::erase::<DaemonSet>(&()),
        };
        let api: Api<kube::api::DynamicObject> =
            Api::namespaced_with(workload_client.clone(), "default", &resource);
        let set = json!({
            "apiVersion": "apps/v1", "kind": kind,
            "metadata": {"name": app},
            "spec": {
                "selector": {"matchLabels": {"app": app}},
                "template": {
                    "metadata": {"labels": {"app": app}},
                    "spec": {"containers": [{"name": app, "image": image}]},
                },
            },
        });
        let set = serde_json::from_value(set).unwrap();
        api.create(&PostParams::default(), &set).await.unwrap();
    }
    let pods: Api<Pod> = Api::namespaced(workload_client.clone(), "default");
    // Every Pod of `app` runs `image` and is Ready, and there are `count` of them.
    let all_run = async |app: &str, image: &str, count: usize| -> Option<()> {
        let list = pods
            .list(&ListParams::default().labels(&format!("app={app}")))
            .await
            .ok()?;
        let live: Vec<&Pod> = list
            .items
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .collect();
        let ready = |p: &Pod| {
            p.status.as_ref().is_some_and(|s| {
                s.conditions
                    .iter()
                    .flatten()
                    .any(|c| c.type_ == "Ready" && c.status == "True")
            })
        };
        (live.len() == count
            && live.iter().all(|p| {
                ready(p) && p.spec.as_ref().unwrap().containers[0].image.as_deref() == Some(image)
            }))
        .then_some(())
    };
    until("the first templates run", 40, async || {
        all_run("db", "postgres:16", 1).await?;
        all_run("agent", "agent:1", 2).await
    })
    .await;
    for (kind, name, container, image) in [
        ("statefulset", "db", "db", "postgres:17"),
        ("daemonset", "agent", "agent", "agent:2"),
    ] {
        kubectl(&[
            "set",
            "image",
            &format!("{kind}/{name}"),
            &format!("{container}={image}"),
        ]);
    }
    until("the new templates run", 60, async || {
        all_run("db", "postgres:17", 1).await?;
        all_run("agent", "agent:2", 2).await
    })
    .await;
    assert_eq!(
        history_of("db").await,
        [(1, "postgres:16".into()), (2, "postgres:17".into())]
    );
    assert_eq!(
        history_of("agent").await,
        [(1, "agent:1".into()), (2, "agent:2".into())]
    );
    let listed = kubectl(&["rollout", "history", "daemonset/agent"]);
    let rows: Vec<&str> = listed
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|w| w.parse::<i64>().is_ok())
        .collect();
    assert_eq!(rows, ["1", "2"], "{listed}");
    let shown = kubectl(&["rollout", "history", "statefulset/db", "--revision=1"]);
    assert!(shown.contains("postgres:16"), "{shown}");

    for (kind, name) in [("statefulset", "db"), ("daemonset", "agent")] {
        let undone = kubectl(&["rollout", "undo", &format!("{kind}/{name}")]);
        assert!(undone.contains("rolled back"), "{undone}");
    }
    until("the previous templates run again", 60, async || {
        all_run("db", "postgres:16", 1).await?;
        all_run("agent", "agent:1", 2).await
    })
    .await;
    // The undone-to revision is now the newest; no third copy of it.
    until("the undone-to revisions are renumbered", 20, async || {
        (history_of("db").await == [(2, "postgres:17".into()), (3, "postgres:16".into())]
            && history_of("agent").await == [(2, "agent:2".into()), (3, "agent:1".into())])
        .then_some(())
    })
    .await;
    until(
        "the StatefulSet's revisions settle on the undone-to one",
        20,
        async || {
            let s = sets.get("db").await.ok()?.status?;
            let name = revisions
                .list(&ListParams::default())
                .await
                .ok()?
                .items
                .into_iter()
                .find(|r| r.revision == Some(3) && r.owner_references()[0].name == "db")?
                .name_any();
            (s.current_revision.as_ref() == Some(&name) && s.update_revision == Some(name))
                .then_some(())
        },
    )
    .await;
    std::fs::remove_dir_all(kubeconfig.parent().unwrap()).ok();
}

/// NodePort Services get node ports of kube-apiserver's range, keep them across updates, give
/// them back when they become ClusterIP, and never share one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_ports_are_allocated_once_and_kept() {
    let client = api_server().await;
    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    let node_port_service = |name: &str, node_port: Option<i64>, kind: &str| -> Service {
        let mut port = json!({"name": "http", "port": 80, "targetPort": 8080});
        if let Some(p) = node_port {
            port["nodePort"] = json!(p);
        }
        serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {"type": kind, "selector": {"app": name}, "ports": [port]},
        }))
        .unwrap()
    };
    let node_port_of = |s: &Service| s.spec.as_ref().unwrap().ports.as_ref().unwrap()[0].node_port;
    let web = services
        .create(
            &PostParams::default(),
            &node_port_service("web", None, "NodePort"),
        )
        .await
        .unwrap();
    let given = node_port_of(&web).expect("a node port is allocated");
    assert!((30000..=32767).contains(&given), "{given}");
    let refusal = |e: kube::Error| match e {
        kube::Error::Api(s) => (s.code, s.message),
        other => panic!("{other}"),
    };
    for (what, service, said) in [
        ("taken", node_port_service("other", Some(i64::from(given)), "NodePort"), format!("spec.ports[0].nodePort: Invalid value: {given}: provided port is already allocated")),
        ("out of range", node_port_service("other", Some(80), "NodePort"), "spec.ports[0].nodePort: Invalid value: 80: provided port is not in the valid range. The range of valid ports is 30000-32767".to_string()),
        ("on a ClusterIP Service", node_port_service("other", Some(31000), "ClusterIP"), "spec.ports[0].nodePort: Forbidden: may not be used when `type` is 'ClusterIP'".to_string()),
    ] {
        let (code, message) = refusal(services.create(&PostParams::default(), &service).await.unwrap_err());
        assert_eq!(code, 422, "{what}");
        assert!(message.contains(&said), "{what}: {message}");
    }
    // An update that leaves the node port out keeps it.
    let relabelled = services
        .replace("web", &PostParams::default(), &{
            let mut s = node_port_service("web", None, "NodePort");
            s.metadata.resource_version = web.metadata.resource_version.clone();
            s.metadata.labels = Some([("tier".to_string(), "front".to_string())].into());
            s
        })
        .await
        .unwrap();
    assert_eq!(node_port_of(&relabelled), Some(given));
    // Made ClusterIP, it gives the port back, and another Service may take it.
    let cluster_ip = services
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"type": "ClusterIP"}})),
        )
        .await
        .unwrap();
    assert_eq!(node_port_of(&cluster_ip), None);
    let other = services
        .create(
            &PostParams::default(),
            &node_port_service("other", Some(i64::from(given)), "NodePort"),
        )
        .await
        .unwrap();
    assert_eq!(node_port_of(&other), Some(given));
}

/// A StatefulSet's Pods wait for their claims as on upstream's Docker clusters, which have no
/// volume provisioner: unscheduled, saying so in kube-scheduler's words, until a volume is
/// bound to the claim.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_wait_unscheduled_for_unbound_claims() {
    let client = available_cluster(1).await;
    let workload_client = workload(&client, "c1").await;
    let sets: Api<StatefulSet> = Api::namespaced(workload_client.clone(), "default");
    sets.create(
        &PostParams::default(),
        &serde_json::from_value(json!({
            "metadata": {"name": "db"},
            "spec": {
                "replicas": 1, "serviceName": "db",
                "selector": {"matchLabels": {"app": "db"}},
                "template": {"metadata": {"labels": {"app": "db"}}, "spec": {"containers": [{"name": "db", "image": "db", "volumeMounts": [{"name": "data", "mountPath": "/data"}]}]}},
                "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}]
            }
        }))
        .unwrap(),
    )
    .await
    .unwrap();
    let pods: Api<Pod> = Api::namespaced(workload_client.clone(), "default");
    let message = until("db-0 is held for its claim", 20, async || {
        let pod = pods.get_opt("db-0").await.ok()??;
        let condition = pod
            .status?
            .conditions?
            .into_iter()
            .find(|c| c.type_ == "PodScheduled" && c.status == "False")?;
        condition.message
    })
    .await;
    assert_eq!(
        message,
        "0/2 nodes are available: pod has unbound immediate PersistentVolumeClaims. preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
    );
    let pod = pods.get("db-0").await.unwrap();
    assert!(
        pod.spec.unwrap().node_name.is_none(),
        "the Pod is bound to no Node"
    );
}

/// A Service may ask for its cluster IP, as kube-apiserver allows: one of the service range
/// that no other Service holds; anything else is refused naming the field and why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_requested_cluster_ip_is_of_the_range_and_never_shared() {
    let client = api_server().await;
    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    let asking = |name: &str, ip: &str| -> Service {
        serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {"clusterIP": ip, "selector": {"app": name}, "ports": [{"port": 80}]},
        }))
        .unwrap()
    };
    let dns = services
        .create(&PostParams::default(), &asking("dns", "10.96.0.10"))
        .await
        .unwrap();
    assert_eq!(dns.spec.unwrap().cluster_ip.as_deref(), Some("10.96.0.10"));
    for (ip, said) in [
        (
            "10.96.0.10",
            "spec.clusterIPs: Invalid value: []string{\"10.96.0.10\"}: failed to allocate IP 10.96.0.10: provided IP is already allocated",
        ),
        (
            "10.128.0.10",
            "spec.clusterIPs: Invalid value: []string{\"10.128.0.10\"}: failed to allocate IP 10.128.0.10: the provided IP (10.128.0.10) is not in the valid range. The range of valid IPs is 10.96.0.0/12",
        ),
    ] {
        let refused = services
            .create(&PostParams::default(), &asking("other", ip))
            .await
            .unwrap_err();
        let kube::Error::Api(status) = refused else {
            panic!("{refused}")
        };
        assert_eq!(status.code, 422, "{ip}");
        assert!(status.message.contains(said), "{ip}: {}", status.message);
    }
    assert!(
        services.get_opt("other").await.unwrap().is_none(),
        "nothing is stored"
    );
}

/// A controller that has just started (a new leader of the control planes) must not act on
/// caches that have not listed their kinds yet: an empty Pod cache would empty every Service's
/// endpoints. Its passes wait for every cache.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pass_waits_for_every_cache_to_list() {
    let client = api_server().await;
    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    services
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": "web"},
                "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    pods.create(
        &PostParams::default(),
        &serde_json::from_value(json!({
            "metadata": {"name": "web", "labels": {"app": "web"}},
            "spec": {"containers": [{"name": "web", "image": "web"}]}
        }))
        .unwrap(),
    )
    .await
    .unwrap();

    let watches = capictl::kubernetes::Watches::default();
    let (service_cache, watch_services) = watches.cache::<Service>(&client);
    let (pod_cache, watch_pods) = watches.cache::<Pod>(&client);
    let services_task = tokio::spawn(watch_services);
    // The Services are listed, the Pods not yet: no pass.
    let early = tokio::time::timeout(
        std::time::Duration::from_secs(2),
        watches.next_pass(std::time::Duration::from_millis(100)),
    )
    .await;
    assert!(early.is_err(), "a pass ran before the Pods were listed");
    assert_eq!(service_cache.state().len(), 1);
    let pods_task = tokio::spawn(watch_pods);
    tokio::time::timeout(
        std::time::Duration::from_secs(10),
        watches.next_pass(std::time::Duration::from_millis(100)),
    )
    .await
    .expect("a pass once both caches listed");
    assert_eq!(pod_cache.state().len(), 1, "the pass sees the Pod");
    services_task.abort();
    pods_task.abort();
}
