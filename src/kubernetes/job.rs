//! The Job controller, as kube-controller-manager's for a NonIndexed Job: it runs Pods of its
//! template, `parallelism` at a time, until `completions` of them have succeeded (or, without
//! `completions`, until one has and none is running), gives up after `backoffLimit` failed Pods
//! or `activeDeadlineSeconds`, deleting what still runs, creates nothing while suspended, and
//! reports `active`, `ready`, `succeeded`, `failed`, the start and completion times and the
//! `SuccessCriteriaMet`/`Complete` or `FailureTarget`/`Failed` conditions `kubectl wait` reads.
//!
//! [`plan`] decides for one Job, purely; [`run`] keeps every Job of a cluster.

use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use super::expectations::{self, CachedPods, Expectations, Writes};
use super::replica_set::{controller_of, is_active, ready_since};

const COMPONENT: &str = "job-controller";
/// The labels kube-controller-manager puts on a Job's Pods.
const JOB_NAME_LABEL: &str = "batch.kubernetes.io/job-name";
const CONTROLLER_UID_LABEL: &str = "batch.kubernetes.io/controller-uid";

/// What a Job needs done.
#[derive(Debug, PartialEq)]
pub struct Plan {
    /// Pods to create.
    pub create: usize,
    /// Pods to delete (the Job finished, failed or was suspended), by name.
    pub delete: Vec<String>,
    /// The status to report.
    pub status: Value,
    /// An Event to record when the Job ends now: (type, reason, message).
    pub event: Option<(&'static str, &'static str, String)>,
}

fn phase(pod: &Pod) -> Option<&str> {
    pod.status.as_ref()?.phase.as_deref()
}

fn condition(kind: &str, reason: &str, message: &str, now: &str) -> Value {
    json!({"type": kind, "status": "True", "reason": reason, "message": message, "lastProbeTime": now, "lastTransitionTime": now})
}

/// Whether a Job has ended: Complete or Failed.
fn finished(job: &Job) -> bool {
    job.status
        .iter()
        .flat_map(|s| s.conditions.iter().flatten())
        .any(|c| (c.type_ == "Complete" || c.type_ == "Failed") && c.status == "True")
}

/// What one Job needs, from its Pods, at `now` (RFC 3339) and `now_seconds` (Unix).
pub fn plan(job: &Job, pods: &[&Pod], now: &str, now_seconds: i64) -> Plan {
    let spec = job.spec.clone().unwrap_or_default();
    let status = job.status.clone().unwrap_or_default();
    let active: Vec<&&Pod> = pods.iter().filter(|p| is_active(p)).collect();
    // Counts only grow: a finished Pod removed later was counted once.
    let succeeded = (pods
        .iter()
        .filter(|p| phase(p) == Some("Succeeded"))
        .count() as i32)
        .max(status.succeeded.unwrap_or(0));
    let failed = (pods.iter().filter(|p| phase(p) == Some("Failed")).count() as i32)
        .max(status.failed.unwrap_or(0));
    let ready = active.iter().filter(|p| ready_since(p).is_some()).count();
    let start_time = status
        .start_time
        .as_ref()
        .map(|t| json!(t))
        .unwrap_or_else(|| json!(now));
    let mut out = json!({
        "active": active.len(),
        "ready": ready,
        "succeeded": succeeded,
        "failed": failed,
        "startTime": start_time,
        "terminating": pods.iter().filter(|p| p.metadata.deletion_timestamp.is_some()).count(),
    });
    if let Some(c) = &status.conditions {
        out["conditions"] = json!(c);
    }
    if let Some(t) = &status.completion_time {
        out["completionTime"] = json!(t);
    }
    let mut plan = Plan {
        create: 0,
        delete: Vec::new(),
        status: out,
        event: None,
    };
    let delete_active = |plan: &mut Plan| {
        plan.delete = active.iter().map(|p| p.name_any()).collect();
    };
    if finished(job) {
        delete_active(&mut plan);
        return plan;
    }
    let started = start_time
        .as_str()
        .and_then(|t| t.parse::<k8s_openapi::jiff::Timestamp>().ok())
        .map_or(now_seconds, |t| t.as_second());
    let backoff_limit = spec.backoff_limit.unwrap_or(6);
    let failure = if failed > backoff_limit {
        Some((
            "BackoffLimitExceeded",
            "Job has reached the specified backoff limit".to_string(),
        ))
    } else {
        spec.active_deadline_seconds
            .filter(|d| now_seconds - started >= *d)
            .map(|_| {
                (
                    "DeadlineExceeded",
                    "Job was active longer than specified deadline".to_string(),
                )
            })
    };
    let conditions = |plan: &mut Plan, list: Vec<Value>| {
        let all = plan.status["conditions"].as_array_mut();
        match all {
            Some(all) => all.extend(list),
            None => plan.status["conditions"] = json!(list),
        }
    };
    if let Some((reason, message)) = failure {
        delete_active(&mut plan);
        conditions(
            &mut plan,
            vec![
                condition("FailureTarget", reason, &message, now),
                condition("Failed", reason, &message, now),
            ],
        );
        plan.event = Some(("Warning", reason, message));
        return plan;
    }
    let done = match spec.completions {
        Some(completions) => succeeded >= completions,
        // A work queue: done once one Pod succeeded and none runs.
        None => succeeded > 0 && active.is_empty(),
    };
    if done {
        delete_active(&mut plan);
        let message = "Reached expected number of succeeded pods";
        conditions(
            &mut plan,
            vec![
                condition("SuccessCriteriaMet", "CompletionsReached", message, now),
                condition("Complete", "CompletionsReached", message, now),
            ],
        );
        plan.status["completionTime"] = json!(now);
        plan.event = Some(("Normal", "Completed", "Job completed".to_string()));
        return plan;
    }
    if spec.suspend == Some(true) {
        delete_active(&mut plan);
        return plan;
    }
    let parallelism = spec.parallelism.unwrap_or(1).max(0);
    let wanted = match spec.completions {
        Some(completions) => parallelism.min(completions - succeeded),
        None if succeeded > 0 => 0,
        None => parallelism,
    };
    plan.create = (wanted - active.len() as i32).max(0) as usize;
    plan
}

/// A Pod of the Job's template, owned by it and labelled as kube-controller-manager labels it.
fn pod_from_template(job: &Job) -> Pod {
    let template = job
        .spec
        .as_ref()
        .map(|s| s.template.clone())
        .unwrap_or_default();
    let (name, uid) = (job.name_any(), job.uid().unwrap_or_default());
    let labels = [
        (JOB_NAME_LABEL, &name),
        ("job-name", &name),
        (CONTROLLER_UID_LABEL, &uid),
        ("controller-uid", &uid),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.clone()))
    .collect();
    super::pod_from_template(job, template, labels)
}

/// Runs the controller until the future is dropped.
pub async fn run(client: Client) {
    let watches = super::Watches::default();
    let (jobs, watch_jobs) = watches.cache::<Job>(&client);
    let (pods, watch_pods) = watches.cache::<Pod>(&client);
    let work = async {
        let mut expecting = Expectations::default();
        loop {
            watches.next_pass(Duration::from_secs(5)).await;
            let pods = pods.state();
            let cached = CachedPods::of(&pods);
            for job in jobs.state() {
                let uid = job.uid().unwrap_or_default();
                if !expecting.settled(&uid, &cached) {
                    continue;
                }
                let owned: Vec<&Pod> = pods
                    .iter()
                    .filter(|p| controller_of(&***p).as_deref() == Some(uid.as_str()))
                    .map(|p| &**p)
                    .collect();
                let now = k8s_openapi::jiff::Timestamp::now();
                let plan = plan(&job, &owned, &super::now(), now.as_second());
                match sync(&client, &job, &plan).await {
                    Ok(writes) => expecting.expect(uid, writes),
                    Err(e) => super::report_failure(COMPONENT, &job.name_any(), &e),
                }
            }
            expecting.retain(jobs.state().iter().filter_map(|j| j.uid()));
        }
    };
    tokio::join!(watch_jobs, watch_pods, work);
}

/// Carries out a plan; the Pods created and deleted.
async fn sync(client: &Client, job: &Job, plan: &Plan) -> Result<Writes, kube::Error> {
    let namespace = job.namespace().unwrap_or_default();
    let api: Api<Pod> = Api::namespaced(client.clone(), &namespace);
    let mut writes = Writes::default();
    for _ in 0..plan.create {
        let pod = api
            .create(&PostParams::default(), &pod_from_template(job))
            .await?;
        super::record_event(
            client,
            job,
            COMPONENT,
            "Normal",
            "SuccessfulCreate",
            &format!("Created pod: {}", pod.name_any()),
        )
        .await;
        writes
            .created
            .insert(expectations::key(&namespace, &pod.name_any()));
    }
    for name in &plan.delete {
        match api.delete(name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.is_not_found() => {}
            Err(e) => return Err(e),
        }
        writes.deleted.insert(expectations::key(&namespace, name));
    }
    let current = serde_json::to_value(job.status.clone().unwrap_or_default()).unwrap_or_default();
    let changed = ["active", "ready", "succeeded", "failed", "terminating"]
        .iter()
        .any(|k| current[k].as_i64().unwrap_or(0) != plan.status[k].as_i64().unwrap_or(0))
        || current["conditions"] != plan.status["conditions"]
        || current["startTime"].is_null();
    if changed {
        super::write_status(client, job, plan.status.clone()).await?;
        if let Some((kind, reason, message)) = &plan.event {
            super::record_event(client, job, COMPONENT, kind, reason, message).await;
        }
    }
    Ok(writes)
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: &str = "2026-12-05T10:00:00Z";

    fn job(spec: Value, status: Value) -> Job {
        let mut spec = spec;
        spec["template"] =
            json!({"spec": {"restartPolicy": "Never", "containers": [{"name": "c"}]}});
        serde_json::from_value(json!({
            "metadata": {"name": "pi", "namespace": "default", "uid": "job-1"},
            "spec": spec,
            "status": status,
        }))
        .unwrap()
    }

    fn pod(name: &str, phase: &str) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "default"},
            "status": {"phase": phase},
        }))
        .unwrap()
    }

    fn seconds(t: &str) -> i64 {
        t.parse::<k8s_openapi::jiff::Timestamp>()
            .unwrap()
            .as_second()
    }

    fn types(plan: &Plan) -> Vec<String> {
        plan.status["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| c["type"].as_str().unwrap().to_string())
            .collect()
    }

    #[test]
    fn pods_run_parallelism_at_a_time_until_the_completions() {
        let j = job(json!({"parallelism": 2, "completions": 3}), json!({}));
        let (done, running) = (pod("a", "Succeeded"), pod("b", "Running"));
        for (pods, create, complete) in [
            (vec![], 2, false),
            (vec![&running], 1, false),
            (vec![&done, &running], 1, false),
            (vec![&done, &done, &running], 0, false),
            (vec![&done, &done, &done], 0, true),
        ] {
            let plan = plan(&j, &pods, NOW, seconds(NOW));
            assert_eq!(plan.create, create, "{pods:?}");
            assert_eq!(types(&plan).contains(&"Complete".to_string()), complete);
        }
        let plan = plan(&j, &[&done, &done, &done], NOW, seconds(NOW));
        assert_eq!(plan.status["succeeded"], 3);
        assert_eq!(plan.status["completionTime"], NOW);
        assert_eq!(plan.event.unwrap().1, "Completed");
    }

    #[test]
    fn a_job_fails_past_its_backoff_limit_or_deadline_and_stops_its_pods() {
        let failed = pod("f", "Failed");
        let running = pod("r", "Running");
        let j = job(json!({"backoffLimit": 1}), json!({}));
        let plan = plan(&j, &[&failed, &failed, &running], NOW, seconds(NOW));
        assert_eq!(types(&plan), ["FailureTarget", "Failed"]);
        assert_eq!(
            plan.status["conditions"][1]["reason"],
            "BackoffLimitExceeded"
        );
        assert_eq!(plan.delete, ["r"]);
        assert_eq!(plan.create, 0);
        // Within the limit, a failed Pod is replaced.
        assert_eq!(super::plan(&j, &[&failed], NOW, seconds(NOW)).create, 1);
        let late = job(
            json!({"activeDeadlineSeconds": 60}),
            json!({"startTime": "2026-12-05T09:58:00Z"}),
        );
        let plan = super::plan(&late, &[&running], NOW, seconds(NOW));
        assert_eq!(plan.status["conditions"][1]["reason"], "DeadlineExceeded");
    }

    #[test]
    fn a_suspended_job_runs_nothing() {
        let j = job(json!({"suspend": true}), json!({}));
        let running = pod("r", "Running");
        let plan = plan(&j, &[&running], NOW, seconds(NOW));
        assert_eq!((plan.create, plan.delete), (0, vec!["r".to_string()]));
    }
}
