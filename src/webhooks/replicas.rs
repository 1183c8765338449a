//! The replicas of a MachineDeployment, MachineSet or MachinePool written without them, as upstream's
//! defaulting webhooks compute them: 1, or, for a node group the cluster autoscaler owns (both
//! size annotations), its minimum when it is new and its current count kept within the bounds
//! when it is not — so that a topology or GitOps tool applying the object without replicas
//! never undoes the autoscaler's work.

use serde_json::{Value, json};

use crate::apiserver::admission::{Admission, Request};
use crate::apiserver::status::{ApiError, FieldCause};

pub(super) struct ReplicasDefault;

/// The autoscaler's bounds from an object's annotations ([`crate::api::autoscaler_bounds`]),
/// or the annotation that does not parse.
fn autoscaler_bounds(object: &Value) -> Result<Option<(i64, i64)>, FieldCause> {
    let annotations: std::collections::BTreeMap<String, String> =
        serde_json::from_value(object["metadata"]["annotations"].clone()).unwrap_or_default();
    crate::api::autoscaler_bounds(&annotations)
        .map(|b| b.map(|(min, max)| (i64::from(min), i64::from(max))))
        .map_err(|(annotation, text)| {
            FieldCause::invalid(
                format!("metadata.annotations[{annotation}]"),
                format!("Invalid value: {text:?}: must be a whole number of replicas"),
            )
        })
}

/// The replicas an object written without them gets, given the stored one (None on create).
pub fn default_replicas(object: &Value, old: Option<&Value>) -> Result<i64, FieldCause> {
    let Some((min, max)) = autoscaler_bounds(object)? else {
        return Ok(1);
    };
    Ok(match old.and_then(|o| o["spec"]["replicas"].as_i64()) {
        None => min,
        Some(current) if current < min => min,
        Some(current) if current > max => max,
        Some(current) => current,
    })
}

impl Admission for ReplicasDefault {
    fn name(&self) -> &str {
        "replicas.cluster.x-k8s.io"
    }

    fn handles(&self, group: &str, kind: &str) -> bool {
        group == "cluster.x-k8s.io"
            && matches!(kind, "MachineSet" | "MachineDeployment" | "MachinePool")
    }

    fn default(&self, request: &Request<'_>, object: &mut Value) -> Result<(), ApiError> {
        if !object["spec"]["replicas"].is_null() || !object["spec"].is_object() {
            return Ok(());
        }
        let replicas = default_replicas(object, request.old).map_err(|cause| {
            ApiError::invalid(request.kind, request.group, request.name, vec![cause])
        })?;
        object["spec"]["replicas"] = json!(replicas);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{AUTOSCALER_MAX_SIZE_ANNOTATION, AUTOSCALER_MIN_SIZE_ANNOTATION};

    fn deployment(replicas: Option<i64>, bounds: Option<(&str, &str)>) -> Value {
        let mut o = json!({"metadata": {"name": "md"}, "spec": {}});
        if let Some(r) = replicas {
            o["spec"]["replicas"] = json!(r);
        }
        if let Some((min, max)) = bounds {
            o["metadata"]["annotations"] = json!({
                AUTOSCALER_MIN_SIZE_ANNOTATION: min, AUTOSCALER_MAX_SIZE_ANNOTATION: max,
            });
        }
        o
    }

    #[test]
    fn replicas_default_as_upstreams_webhooks_compute_them() {
        let bounds = Some(("2", "5"));
        let cases = [
            ("no annotations", None, None, 1),
            ("new, owned by the autoscaler", bounds, None, 2),
            (
                "stored without replicas",
                bounds,
                Some(deployment(None, bounds)),
                2,
            ),
            (
                "stored below the minimum",
                bounds,
                Some(deployment(Some(1), bounds)),
                2,
            ),
            (
                "stored above the maximum",
                bounds,
                Some(deployment(Some(9), bounds)),
                5,
            ),
            (
                "stored within the bounds",
                bounds,
                Some(deployment(Some(4), bounds)),
                4,
            ),
            ("only a minimum", Some(("2", "")), None, 1),
        ];
        for (name, bounds, old, want) in cases {
            let mut object = deployment(None, bounds);
            if name == "only a minimum" {
                object["metadata"]["annotations"]
                    .as_object_mut()
                    .unwrap()
                    .remove(AUTOSCALER_MAX_SIZE_ANNOTATION);
            }
            assert_eq!(default_replicas(&object, old.as_ref()), Ok(want), "{name}");
        }
    }

    #[test]
    fn a_size_that_is_not_a_number_is_named() {
        let cause = default_replicas(&deployment(None, Some(("two", "5"))), None).unwrap_err();
        assert_eq!(
            cause.field,
            "metadata.annotations[cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size]"
        );
        assert_eq!(
            cause.message,
            "Invalid value: \"two\": must be a whole number of replicas"
        );
    }
}
