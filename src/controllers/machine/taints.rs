//! A Machine's `spec.taints` on its Node (upstream v1.12's MachineTaintPropagation): `Always`
//! taints kept in step with the Machine, added, changed and removed; `OnInitialization` taints
//! put on a new Node once. The Node's `cluster.x-k8s.io/taints-from-machine` annotation says
//! which taints the Machine owns (`key:Effect`, sorted) and that the Node was initialized.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Taint;

use crate::api::common::{MachineTaint, TaintPropagation};

/// On a Node: the `Always` taints that came from its Machine.
pub const TAINTS_FROM_MACHINE_ANNOTATION: &str = "cluster.x-k8s.io/taints-from-machine";

fn effect(taint: &MachineTaint) -> String {
    serde_json::to_value(taint.effect)
        .ok()
        .and_then(|v| v.as_str().map(String::from))
        .unwrap_or_default()
}

fn id(key: &str, effect: &str) -> String {
    format!("{key}:{effect}")
}

/// The Node's taints and tracking annotation once `machine` taints are applied to what the
/// Node has (`taints`, and the annotation if set), or None when they are already so.
pub fn propagate(
    taints: &[Taint],
    annotation: Option<&str>,
    machine: &[MachineTaint],
) -> Option<(Vec<Taint>, String)> {
    let owned: BTreeSet<String> = annotation
        .unwrap_or_default()
        .split(',')
        .filter(|t| !t.is_empty())
        .map(String::from)
        .collect();
    let initialized = annotation.is_some();
    let mut out = taints.to_vec();
    let mut now_owned = BTreeSet::new();
    let mut on_initialization = BTreeSet::new();
    for taint in machine {
        let effect = effect(taint);
        match taint.propagation {
            TaintPropagation::Always => now_owned.insert(id(&taint.key, &effect)),
            TaintPropagation::OnInitialization => on_initialization.insert(id(&taint.key, &effect)),
        };
        if taint.propagation == TaintPropagation::OnInitialization && initialized {
            continue;
        }
        match out
            .iter_mut()
            .find(|t| t.key == taint.key && t.effect == effect)
        {
            Some(there) if there.value == taint.value => {}
            Some(there) => there.value = taint.value.clone(),
            None => out.push(Taint {
                key: taint.key.clone(),
                value: taint.value.clone(),
                effect,
                time_added: None,
            }),
        }
    }
    // Taints the Machine owned and no longer has go (an OnInitialization one stays).
    out.retain(|t| {
        let this = id(&t.key, &t.effect);
        !owned.contains(&this) || now_owned.contains(&this) || on_initialization.contains(&this)
    });
    let new_annotation = now_owned.into_iter().collect::<Vec<_>>().join(",");
    let unchanged = out == taints && annotation == Some(new_annotation.as_str());
    (!unchanged).then_some((out, new_annotation))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn machine(key: &str, value: &str, propagation: TaintPropagation) -> MachineTaint {
        serde_json::from_value(serde_json::json!({
            "key": key, "value": value, "effect": "NoSchedule", "propagation": propagation,
        }))
        .unwrap()
    }

    fn node(key: &str, value: &str) -> Taint {
        Taint {
            key: key.into(),
            value: Some(value.into()),
            effect: "NoSchedule".into(),
            time_added: None,
        }
    }

    use TaintPropagation::{Always, OnInitialization};

    #[test]
    fn taints_follow_the_machine_as_upstream_propagates_them() {
        struct Case {
            name: &'static str,
            node: Vec<Taint>,
            annotation: Option<&'static str>,
            machine: Vec<MachineTaint>,
            want: Option<(Vec<Taint>, &'static str)>,
        }
        let cases = [
            Case {
                name: "a new Node gets both kinds, and the annotation names the Always ones",
                node: vec![node("other", "x")],
                annotation: None,
                machine: vec![
                    machine("pool", "gpu", Always),
                    machine("warm", "up", OnInitialization),
                ],
                want: Some((
                    vec![node("other", "x"), node("pool", "gpu"), node("warm", "up")],
                    "pool:NoSchedule",
                )),
            },
            Case {
                name: "an initialized Node does not get OnInitialization taints again",
                node: vec![node("pool", "gpu")],
                annotation: Some("pool:NoSchedule"),
                machine: vec![
                    machine("pool", "gpu", Always),
                    machine("warm", "up", OnInitialization),
                ],
                want: None,
            },
            Case {
                name: "a changed value is written",
                node: vec![node("pool", "gpu")],
                annotation: Some("pool:NoSchedule"),
                machine: vec![machine("pool", "cpu", Always)],
                want: Some((vec![node("pool", "cpu")], "pool:NoSchedule")),
            },
            Case {
                name: "a taint the Machine dropped goes; one it never owned stays",
                node: vec![node("pool", "gpu"), node("theirs", "y")],
                annotation: Some("pool:NoSchedule"),
                machine: vec![],
                want: Some((vec![node("theirs", "y")], "")),
            },
            Case {
                name: "a Machine without taints marks the Node initialized once",
                node: vec![],
                annotation: None,
                machine: vec![],
                want: Some((vec![], "")),
            },
        ];
        for case in cases {
            let got = propagate(&case.node, case.annotation, &case.machine);
            let want = case.want.map(|(t, a)| (t, a.to_string()));
            assert_eq!(got, want, "{}", case.name);
        }
    }
}
