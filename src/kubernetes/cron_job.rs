//! The CronJob controller, as kube-controller-manager's: at each time its schedule names (UTC)
//! a CronJob creates a Job of its template, named `<cronjob>-<minutes since the epoch>` so
//! that a time is never run twice, unless it is suspended, the time is older than
//! `startingDeadlineSeconds`, or `concurrencyPolicy` says otherwise (`Forbid` skips while a
//! Job runs, `Replace` deletes the running ones first). Finished Jobs beyond
//! `successfulJobsHistoryLimit` (3) and `failedJobsHistoryLimit` (1) are deleted oldest first.
//! The status lists the active Jobs and the last schedule and success times.
//!
//! [`plan`] decides for one CronJob, purely; [`run`] keeps every CronJob of a cluster.

use std::time::Duration;

use k8s_openapi::api::batch::v1::{CronJob, Job};
use kube::api::{Api, DeleteParams, PostParams, PropagationPolicy};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};
use time::OffsetDateTime;

use super::cron::Schedule;
use super::replica_set::controller_of;

const COMPONENT: &str = "cronjob-controller";
/// The annotation kube puts on a CronJob's Jobs: the time they were scheduled for.
pub const SCHEDULED_TIMESTAMP_ANNOTATION: &str = "batch.kubernetes.io/cronjob-scheduled-timestamp";
/// More missed times than this, and the CronJob says so (kube's `TooManyMissedTimes`).
const MISSED_AT_MOST: usize = 100;

/// What a CronJob needs done now.
#[derive(Debug, Default, PartialEq)]
pub struct Plan {
    /// A Job to create.
    pub create: Option<Job>,
    /// Jobs to delete (replaced, or beyond the history limits), by name.
    pub delete: Vec<String>,
    /// The status to report.
    pub status: Value,
    /// Events to record: (type, reason, message).
    pub events: Vec<(&'static str, &'static str, String)>,
    /// When the schedule next runs, to look again then.
    pub next: Option<OffsetDateTime>,
}

fn rfc3339(t: OffsetDateTime) -> String {
    t.format(&time::format_description::well_known::Rfc3339)
        .expect("a time formats")
}

fn parse_time(t: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Time) -> Option<OffsetDateTime> {
    OffsetDateTime::from_unix_timestamp(t.0.as_second()).ok()
}

/// A Job's finishing condition (`Complete` or `Failed`), if it has finished.
fn finished(job: &Job) -> Option<&str> {
    job.status
        .iter()
        .flat_map(|s| s.conditions.iter().flatten())
        .find(|c| (c.type_ == "Complete" || c.type_ == "Failed") && c.status == "True")
        .map(|c| c.type_.as_str())
}

/// The Job of the CronJob's template for the time `scheduled`.
pub fn job_for(cron_job: &CronJob, scheduled: OffsetDateTime) -> Job {
    let template = cron_job.spec.job_template.clone();
    let meta = template.metadata.unwrap_or_default();
    let mut annotations = meta.annotations.unwrap_or_default();
    annotations.insert(
        SCHEDULED_TIMESTAMP_ANNOTATION.to_string(),
        rfc3339(scheduled),
    );
    Job {
        metadata: kube::api::ObjectMeta {
            name: Some(format!(
                "{}-{}",
                cron_job.name_any(),
                scheduled.unix_timestamp() / 60
            )),
            namespace: cron_job.namespace(),
            labels: meta.labels,
            annotations: Some(annotations),
            owner_references: Some(vec![super::controller_reference(cron_job)]),
            ..Default::default()
        },
        spec: template.spec,
        status: None,
    }
}

fn reference(job: &Job) -> Value {
    json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "name": job.name_any(), "namespace": job.namespace(), "uid": job.uid(),
        "resourceVersion": job.resource_version(),
    })
}

/// What one CronJob needs at `now`, from the Jobs it owns.
pub fn plan(cron_job: &CronJob, jobs: &[&Job], now: OffsetDateTime) -> Plan {
    let spec = cron_job.spec.clone();
    let status = cron_job.status.clone().unwrap_or_default();
    let mut plan = Plan::default();
    let active: Vec<&&Job> = jobs.iter().filter(|j| finished(j).is_none()).collect();
    let mut last_successful = status.last_successful_time.as_ref().and_then(parse_time);
    for job in jobs {
        if finished(job) == Some("Complete") {
            let done = job
                .status
                .as_ref()
                .and_then(|s| s.completion_time.as_ref())
                .and_then(parse_time);
            if done > last_successful {
                last_successful = done;
            }
        }
    }
    // Finished Jobs beyond the history limits go, oldest first.
    for (kind, limit) in [
        ("Complete", spec.successful_jobs_history_limit.unwrap_or(3)),
        ("Failed", spec.failed_jobs_history_limit.unwrap_or(1)),
    ] {
        let mut done: Vec<&&Job> = jobs.iter().filter(|j| finished(j) == Some(kind)).collect();
        done.sort_by_key(|j| j.metadata.creation_timestamp.as_ref().map(|t| t.0));
        let surplus = done.len().saturating_sub(limit.max(0) as usize);
        plan.delete
            .extend(done.iter().take(surplus).map(|j| j.name_any()));
    }
    let mut last_schedule = status.last_schedule_time.as_ref().and_then(parse_time);
    let mut active_refs: Vec<Value> = active.iter().map(|j| reference(j)).collect();
    let schedule = Schedule::parse(&spec.schedule);
    let zoned = match (&schedule, spec.time_zone.as_deref()) {
        (Ok(s), Some(zone)) => Some(s.clone().in_time_zone(zone)),
        _ => None,
    };
    match (&schedule, zoned) {
        (Err(why), _) => plan.events.push((
            "Warning",
            "UnparseableSchedule",
            format!("unparseable schedule: {:?} : {why}", spec.schedule),
        )),
        (Ok(_), Some(Err(why))) => plan.events.push((
            "Warning",
            "UnknownTimeZone",
            format!(
                "invalid timeZone: {:?}: {why}",
                spec.time_zone.as_deref().unwrap_or_default()
            ),
        )),
        (Ok(unzoned), zoned)
            if spec.suspend != Some(true) && cron_job.metadata.deletion_timestamp.is_none() =>
        {
            let schedule = zoned
                .and_then(Result::ok)
                .unwrap_or_else(|| unzoned.clone());
            let created = cron_job
                .metadata
                .creation_timestamp
                .as_ref()
                .and_then(parse_time)
                .unwrap_or(now);
            let mut since = last_schedule.unwrap_or(created);
            if let Some(deadline) = spec.starting_deadline_seconds {
                since = since.max(now - time::Duration::seconds(deadline));
            }
            let (due, missed) = schedule.most_recent(since, now, MISSED_AT_MOST);
            if missed >= MISSED_AT_MOST {
                plan.events.push((
                    "Warning",
                    "TooManyMissedTimes",
                    format!(
                        "too many missed start times: {missed}. Set or decrease .spec.startingDeadlineSeconds or check clock skew"
                    ),
                ));
            }
            plan.next = schedule.next(now);
            if let Some(due) = due {
                let name = job_for(cron_job, due).name_any();
                let exists = jobs.iter().any(|j| j.name_any() == name);
                let policy = spec.concurrency_policy.as_deref().unwrap_or("Allow");
                if exists {
                    // Made already (this controller's cache had not shown it).
                } else if policy == "Forbid" && !active.is_empty() {
                    // Skipped; the same time is not tried again.
                    last_schedule = Some(due);
                } else {
                    if policy == "Replace" {
                        for job in &active {
                            plan.delete.push(job.name_any());
                        }
                        active_refs.clear();
                    }
                    let job = job_for(cron_job, due);
                    plan.events.push((
                        "Normal",
                        "SuccessfulCreate",
                        format!("Created job {}", job.name_any()),
                    ));
                    active_refs.push(reference(&job));
                    plan.create = Some(job);
                    last_schedule = Some(due);
                }
            }
        }
        _ => {}
    }
    plan.status = json!({
        "active": if active_refs.is_empty() { Value::Null } else { json!(active_refs) },
        "lastScheduleTime": last_schedule.map(rfc3339),
        "lastSuccessfulTime": last_successful.map(rfc3339),
    });
    plan
}

fn status_differs(cron_job: &CronJob, wanted: &Value) -> bool {
    let current =
        serde_json::to_value(cron_job.status.clone().unwrap_or_default()).unwrap_or_default();
    let names = |v: &Value| -> Vec<String> {
        v.as_array()
            .into_iter()
            .flatten()
            .filter_map(|r| r["name"].as_str().map(str::to_string))
            .collect()
    };
    names(&current["active"]) != names(&wanted["active"])
        || current["lastScheduleTime"] != wanted["lastScheduleTime"]
        || current["lastSuccessfulTime"] != wanted["lastSuccessfulTime"]
}

/// Runs the controller until the future is dropped.
pub async fn run(client: Client) {
    let watches = super::Watches::default();
    let (cron_jobs, watch_cron_jobs) = watches.cache::<CronJob>(&client);
    let (jobs, watch_jobs) = watches.cache::<Job>(&client);
    let work = async {
        let mut period = Duration::from_secs(10);
        // Once per unparseable schedule or zone, not every pass.
        let mut warned: std::collections::BTreeSet<(String, String)> = Default::default();
        loop {
            watches.next_pass(period).await;
            let jobs = jobs.state();
            let now = OffsetDateTime::now_utc();
            let mut next: Option<OffsetDateTime> = None;
            for cron_job in cron_jobs.state() {
                let uid = cron_job.uid().unwrap_or_default();
                let owned: Vec<&Job> = jobs
                    .iter()
                    .filter(|j| controller_of(&***j).as_deref() == Some(uid.as_str()))
                    .map(|j| &**j)
                    .collect();
                let mut plan = plan(&cron_job, &owned, now);
                plan.events.retain(|(kind, reason, message)| {
                    *kind == "Normal" || warned.insert((uid.clone(), format!("{reason}{message}")))
                });
                if let Err(e) = sync(&client, &cron_job, &plan).await {
                    super::report_failure(COMPONENT, &cron_job.name_any(), &e);
                }
                next = match (next, plan.next) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
            }
            // Awake for the next scheduled time, and at least every ten seconds.
            period = next
                .map(|t| (t - OffsetDateTime::now_utc()).max(time::Duration::milliseconds(100)))
                .and_then(|d| Duration::try_from(d).ok())
                .unwrap_or(Duration::from_secs(10))
                .min(Duration::from_secs(10));
        }
    };
    tokio::join!(watch_cron_jobs, watch_jobs, work);
}

/// Carries out a plan.
async fn sync(client: &Client, cron_job: &CronJob, plan: &Plan) -> Result<(), kube::Error> {
    let api: Api<Job> = Api::namespaced(client.clone(), &cron_job.namespace().unwrap_or_default());
    // Jobs take their Pods with them.
    let background = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Background),
        ..Default::default()
    };
    for name in &plan.delete {
        let result = api.delete(name, &background).await;
        let message = format!("Deleted job {name}");
        super::record_write(
            client,
            cron_job,
            COMPONENT,
            ("SuccessfulDelete", message),
            result,
        )
        .await?;
    }
    let mut status = plan.status.clone();
    if let Some(job) = &plan.create {
        match api.create(&PostParams::default(), job).await {
            Ok(created) => {
                // The active reference carries the uid the API gave.
                if let Some(refs) = status["active"].as_array_mut() {
                    for r in refs
                        .iter_mut()
                        .filter(|r| r["name"] == json!(created.name_any()))
                    {
                        *r = reference(&created);
                    }
                }
            }
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(e) => return Err(e),
        }
    }
    for (kind, reason, message) in &plan.events {
        super::record_event(client, cron_job, COMPONENT, kind, reason, message).await;
    }
    if status_differs(cron_job, &status) {
        super::write_status(client, cron_job, status).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    fn cron_job(spec: Value, status: Value) -> CronJob {
        let mut spec = spec;
        spec["jobTemplate"] = json!({"spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c"}]}}}});
        serde_json::from_value(json!({
            "metadata": {"name": "tick", "namespace": "default", "uid": "cj-1",
                "creationTimestamp": "2026-12-05T10:00:00Z"},
            "spec": spec,
            "status": status,
        }))
        .unwrap()
    }

    fn job(name: &str, finished: Option<(&str, &str)>) -> Job {
        let status = match finished {
            Some((kind, at)) => {
                json!({"conditions": [{"type": kind, "status": "True"}], "completionTime": at})
            }
            None => json!({"active": 1}),
        };
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "default", "creationTimestamp": "2026-12-05T10:00:00Z"},
            "status": status,
        }))
        .unwrap()
    }

    #[test]
    fn a_job_per_scheduled_time_named_by_its_minute() {
        let cj = cron_job(json!({"schedule": "*/5 * * * *"}), json!({}));
        let plan = plan(&cj, &[], datetime!(2026-12-05 10:03 UTC));
        assert!(plan.create.is_none(), "nothing due before 10:05");
        assert_eq!(plan.next, Some(datetime!(2026-12-05 10:05 UTC)));
        let plan = super::plan(&cj, &[], datetime!(2026-12-05 10:05:02 UTC));
        let created = plan.create.unwrap();
        let minute = datetime!(2026-12-05 10:05 UTC).unix_timestamp() / 60;
        assert_eq!(created.name_any(), format!("tick-{minute}"));
        assert_eq!(
            created.annotations()[SCHEDULED_TIMESTAMP_ANNOTATION],
            "2026-12-05T10:05:00Z"
        );
        assert_eq!(created.owner_references()[0].uid, "cj-1");
        assert_eq!(plan.status["lastScheduleTime"], "2026-12-05T10:05:00Z");
        assert_eq!(plan.status["active"][0]["name"], format!("tick-{minute}"));
        // Once made, the same time is not run again.
        let made = job(&format!("tick-{minute}"), None);
        let again = super::plan(&cj, &[&made], datetime!(2026-12-05 10:05:30 UTC));
        assert!(again.create.is_none());
    }

    #[test]
    fn concurrency_policies_suspension_and_deadlines() {
        let now = datetime!(2026-12-05 10:10:01 UTC);
        let running = job("tick-1", None);
        let last = json!({"lastScheduleTime": "2026-12-05T10:05:00Z"});
        let forbid = cron_job(
            json!({"schedule": "*/5 * * * *", "concurrencyPolicy": "Forbid"}),
            last.clone(),
        );
        let plan = plan(&forbid, &[&running], now);
        assert!(plan.create.is_none());
        assert_eq!(
            plan.status["lastScheduleTime"], "2026-12-05T10:10:00Z",
            "a skipped time is not tried again"
        );
        let replace = cron_job(
            json!({"schedule": "*/5 * * * *", "concurrencyPolicy": "Replace"}),
            last.clone(),
        );
        let plan = super::plan(&replace, &[&running], now);
        assert_eq!(plan.delete, ["tick-1"]);
        assert!(plan.create.is_some());
        let allow = cron_job(json!({"schedule": "*/5 * * * *"}), last.clone());
        assert!(super::plan(&allow, &[&running], now).create.is_some());
        let suspended = cron_job(
            json!({"schedule": "*/5 * * * *", "suspend": true}),
            last.clone(),
        );
        assert!(super::plan(&suspended, &[], now).create.is_none());
        // 10:10 was missed by more than the deadline allows.
        let late = cron_job(
            json!({"schedule": "*/5 * * * *", "startingDeadlineSeconds": 30}),
            last,
        );
        assert!(
            super::plan(&late, &[], datetime!(2026-12-05 10:11 UTC))
                .create
                .is_none()
        );
        assert!(super::plan(&late, &[], now).create.is_some());
    }

    #[test]
    fn finished_jobs_beyond_the_history_limits_go_oldest_first() {
        let cj = cron_job(
            json!({"schedule": "0 0 1 1 *", "successfulJobsHistoryLimit": 2, "failedJobsHistoryLimit": 0}),
            json!({}),
        );
        let mut done: Vec<Job> = ["a", "b", "c"]
            .iter()
            .map(|n| job(n, Some(("Complete", "2026-12-05T10:00:00Z"))))
            .collect();
        done[0].metadata.creation_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                "2026-12-05T09:00:00Z".parse().unwrap(),
            ));
        let failed = job("f", Some(("Failed", "2026-12-05T10:01:00Z")));
        let refs: Vec<&Job> = done.iter().chain([&failed]).collect();
        let plan = plan(&cj, &refs, datetime!(2026-12-05 10:30 UTC));
        assert_eq!(plan.delete, ["a", "f"]);
        assert_eq!(plan.status["lastSuccessfulTime"], "2026-12-05T10:00:00Z");
        assert!(plan.status["active"].is_null());
    }

    #[test]
    fn an_unparseable_schedule_or_zone_is_an_event_and_runs_nothing() {
        let bad = cron_job(json!({"schedule": "every minute"}), json!({}));
        let plan = plan(&bad, &[], datetime!(2026-12-05 10:30 UTC));
        assert!(plan.create.is_none());
        assert_eq!(plan.events[0].1, "UnparseableSchedule");
        let unknown = cron_job(
            json!({"schedule": "* * * * *", "timeZone": "Mars/Olympus"}),
            json!({}),
        );
        let plan = super::plan(&unknown, &[], datetime!(2026-12-05 10:30 UTC));
        assert!(plan.create.is_none());
        assert_eq!(plan.events[0].1, "UnknownTimeZone");
        assert_eq!(
            plan.events[0].2,
            "invalid timeZone: \"Mars/Olympus\": unknown time zone Mars/Olympus"
        );
    }

    #[test]
    fn a_schedule_runs_on_its_time_zones_clock() {
        // 09:00 in Paris is 08:00 UTC in December.
        let paris = cron_job(
            json!({"schedule": "0 9 * * *", "timeZone": "Europe/Paris"}),
            json!({}),
        );
        let before = plan(&paris, &[], datetime!(2026-12-06 07:59 UTC));
        assert!(before.create.is_none());
        assert_eq!(before.next, Some(datetime!(2026-12-06 08:00 UTC)));
        let due = plan(&paris, &[], datetime!(2026-12-06 08:00:05 UTC));
        assert!(due.create.is_some(), "{:?}", due.events);
        assert!(
            due.events.iter().all(|e| e.0 != "Warning"),
            "{:?}",
            due.events
        );
    }
}
