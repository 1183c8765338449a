//! The Eviction subresource of Pods (`POST .../pods/NAME/eviction`): a Pod goes only if no
//! PodDisruptionBudget covering it would drop below what it promises. As kube-apiserver, it
//! spends the budget's `status.disruptionsAllowed` when a disruption controller keeps it
//! current (the workload clusters' controller-manager does), recording the Pod in
//! `disruptedPods`; where none does (the management cluster), the budget is worked out from the
//! Pods at the moment of the eviction.

use serde_json::Value;

use super::selector::LabelSelector;

/// Whether the Pod counts as healthy for a budget: Ready and not on its way out.
pub fn healthy(pod: &Value) -> bool {
    pod["metadata"].get("deletionTimestamp").is_none()
        && pod["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "Ready" && c["status"] == "True")
}

/// `n` or `"n%"` of `total`, rounded up as the disruption controller rounds.
fn scaled(value: &Value, total: usize) -> Option<usize> {
    match value {
        Value::Number(n) => n.as_u64().map(|n| n as usize),
        Value::String(s) => {
            let percent: usize = s.strip_suffix('%')?.parse().ok()?;
            Some((percent * total).div_ceil(100))
        }
        _ => None,
    }
}

/// Whether a Pod is still running (finished Pods are evicted without asking any budget).
pub fn running(pod: &Value) -> bool {
    !matches!(
        pod["status"]["phase"].as_str(),
        Some("Succeeded" | "Failed")
    )
}

/// The budgets among `budgets` that cover `pod`. In policy/v1 an empty selector covers every
/// Pod of the namespace and a missing one none.
pub fn covering<'a>(budgets: &'a [Value], pod: &Value) -> Vec<&'a Value> {
    budgets
        .iter()
        .filter(|b| {
            let selector = &b["spec"]["selector"];
            selector.is_object()
                && LabelSelector::from_object(selector).is_ok_and(|s| s.matches_object(pod))
        })
        .collect()
}

/// Whether `budget` lets `pod` go, given the Pods of its namespace; Err says why not.
pub fn allows(budget: &Value, pods: &[Value], pod: &Value) -> Result<(), String> {
    let Ok(selector) = LabelSelector::from_object(&budget["spec"]["selector"]) else {
        return Ok(());
    };
    let covered: Vec<&Value> = pods
        .iter()
        .filter(|p| running(p) && selector.matches_object(p))
        .collect();
    let expected = covered.len();
    let healthy_now = covered.iter().filter(|p| healthy(p)).count();
    let spec = &budget["spec"];
    let desired = if let Some(min) = spec.get("minAvailable").and_then(|v| scaled(v, expected)) {
        min
    } else if let Some(max) = spec.get("maxUnavailable").and_then(|v| scaled(v, expected)) {
        expected.saturating_sub(max)
    } else {
        // A budget that promises nothing.
        0
    };
    // An unhealthy Pod does not lower the count of healthy ones by going.
    let after = if healthy(pod) {
        healthy_now.saturating_sub(1)
    } else {
        healthy_now
    };
    if after >= desired {
        Ok(())
    } else {
        Err(format!(
            "The disruption budget {} needs {desired} healthy pods and has {healthy_now} currently",
            budget["metadata"]["name"].as_str().unwrap_or_default()
        ))
    }
}

/// What a disruption controller lets go now, when it keeps the budget current (its status
/// observed the budget's generation); None when no controller does.
pub fn controller_allowance(budget: &Value) -> Option<i64> {
    let status = &budget["status"];
    let observed = status["observedGeneration"].as_i64()?;
    (observed == budget["metadata"]["generation"].as_i64().unwrap_or(1))
        .then(|| status["disruptionsAllowed"].as_i64().unwrap_or(0))
}

/// Why a budget whose allowance is spent refuses, in kube-apiserver's words.
pub fn spent(budget: &Value) -> String {
    format!(
        "The disruption budget {} needs {} healthy pods and has {} currently",
        budget["metadata"]["name"].as_str().unwrap_or_default(),
        budget["status"]["desiredHealthy"].as_i64().unwrap_or(0),
        budget["status"]["currentHealthy"].as_i64().unwrap_or(0),
    )
}

/// The budget after one eviction of `pod` at `now`: one disruption fewer allowed, and the Pod
/// remembered until the controller sees it go.
pub fn spend(budget: &Value, pod: &str, now: &str) -> Value {
    let mut out = budget.clone();
    let allowed = out["status"]["disruptionsAllowed"].as_i64().unwrap_or(0);
    out["status"]["disruptionsAllowed"] = serde_json::json!(allowed - 1);
    if !out["status"]["disruptedPods"].is_object() {
        out["status"]["disruptedPods"] = serde_json::json!({});
    }
    out["status"]["disruptedPods"][pod] = serde_json::json!(now);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(name: &str, ready: bool) -> Value {
        json!({
            "metadata": {"name": name, "labels": {"app": "web"}},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}
        })
    }

    fn budget(spec: Value) -> Value {
        let mut spec = spec;
        spec["selector"] = json!({"matchLabels": {"app": "web"}});
        json!({"metadata": {"name": "web"}, "spec": spec})
    }

    #[test]
    fn a_budget_lets_pods_go_while_it_keeps_its_promise() {
        let three = [pod("a", true), pod("b", true), pod("c", true)];
        let two_ready = [pod("a", true), pod("b", true), pod("c", false)];
        for (spec, pods, evicted, allowed) in [
            (json!({"minAvailable": 2}), &three, &three[0], true),
            (json!({"minAvailable": 3}), &three, &three[0], false),
            (json!({"minAvailable": "50%"}), &three, &three[0], true),
            (json!({"minAvailable": "100%"}), &three, &three[0], false),
            (json!({"maxUnavailable": 1}), &three, &three[0], true),
            (json!({"maxUnavailable": 0}), &three, &three[0], false),
            (
                json!({"maxUnavailable": 1}),
                &two_ready,
                &two_ready[0],
                false,
            ),
            // The unready Pod can go: the healthy count stays.
            (json!({"minAvailable": 2}), &two_ready, &two_ready[2], true),
            (json!({}), &three, &three[0], true),
        ] {
            let verdict = allows(&budget(spec.clone()), pods, evicted);
            assert_eq!(verdict.is_ok(), allowed, "{spec} evicting {evicted}");
        }
        assert_eq!(
            allows(&budget(json!({"minAvailable": 3})), &three, &three[0]).unwrap_err(),
            "The disruption budget web needs 3 healthy pods and has 3 currently"
        );
    }

    #[test]
    fn only_budgets_whose_selector_matches_cover_a_pod() {
        let budgets = [
            budget(json!({"minAvailable": 1})),
            json!({"metadata": {"name": "db"}, "spec": {"selector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["db"]}]}}}),
            json!({"metadata": {"name": "all"}, "spec": {"selector": {}}}),
            json!({"metadata": {"name": "none"}, "spec": {}}),
        ];
        let covering: Vec<&str> = covering(&budgets, &pod("a", true))
            .iter()
            .map(|b| b["metadata"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(covering, ["web", "all"]);
    }
}
