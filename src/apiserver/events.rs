//! Events are one resource with two views, as in kube-apiserver: `events.k8s.io/v1` Events
//! (what kube-runtime's recorder and client-go's new recorder write) are stored as core `v1`
//! Events (what `kubectl get events` and `kubectl describe` read), so that either view lists
//! what was written through the other. The two differ only in field names.

use serde_json::Value;

use super::registry::Resource;

/// The group of the second view.
pub const VIEW_GROUP: &str = "events.k8s.io";

/// `events.k8s.io/v1` field names and the core `v1` names they are stored under.
const RENAMED: [(&str, &str); 7] = [
    ("note", "message"),
    ("regarding", "involvedObject"),
    ("reportingController", "reportingComponent"),
    ("deprecatedCount", "count"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedSource", "source"),
];

/// Whether a resource is the `events.k8s.io` view of the core Events.
pub fn is_view(group: &str, plural: &str) -> bool {
    group == VIEW_GROUP && plural == "events"
}

/// The group whose keys hold the objects of `group`/`plural`: the core group's for the
/// `events.k8s.io` view, else its own.
pub fn storage_group(group: &str, plural: &str) -> Option<String> {
    is_view(group, plural).then(String::new)
}

/// Renames the top-level fields of an Event (or of a merge patch of one) from one view's names
/// to the other's, for the resource it was sent to or is read from.
fn rename(object: &mut Value, to_stored: bool) {
    let Some(fields) = object.as_object_mut() else {
        return;
    };
    for (view, stored) in RENAMED {
        let (from, to) = if to_stored {
            (view, stored)
        } else {
            (stored, view)
        };
        if let Some(value) = fields.remove(from) {
            fields.insert(to.to_string(), value);
        }
    }
}

/// What a client sent to `resource`, in the form it is stored in.
pub fn to_stored(resource: &Resource, object: &mut Value) {
    if is_view(&resource.group, &resource.plural) {
        rename(object, true);
    }
}

/// A stored object as `resource` presents it.
pub fn to_view(resource: &Resource, object: &mut Value) {
    if is_view(&resource.group, &resource.plural) {
        rename(object, false);
    }
}

/// The stored field a field selector of `resource` names (`regarding.name` is
/// `involvedObject.name`).
pub fn stored_field(resource: &Resource, field: &str) -> String {
    if !is_view(&resource.group, &resource.plural) {
        return field.to_string();
    }
    let (head, rest) = field
        .split_once('.')
        .map_or((field, None), |(h, r)| (h, Some(r)));
    match RENAMED.iter().find(|(view, _)| *view == head) {
        Some((_, stored)) => match rest {
            Some(rest) => format!("{stored}.{rest}"),
            None => stored.to_string(),
        },
        None => field.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_event_reads_the_same_through_either_view() {
        let sent = json!({
            "metadata": {"name": "m.1", "namespace": "default"},
            "eventTime": "2026-12-01T00:00:00.000000Z",
            "reason": "SuccessfulCreate",
            "note": "Created machine \"m\"",
            "regarding": {"kind": "MachineSet", "name": "ms"},
            "reportingController": "machineset-controller",
            "reportingInstance": "capictl",
            "series": {"count": 2, "lastObservedTime": "2026-12-01T00:00:01.000000Z"},
            "type": "Normal",
        });
        let mut stored = sent.clone();
        rename(&mut stored, true);
        assert_eq!(stored["message"], "Created machine \"m\"");
        assert_eq!(stored["involvedObject"]["kind"], "MachineSet");
        assert_eq!(stored["reportingComponent"], "machineset-controller");
        assert_eq!(stored["series"]["count"], 2);
        assert!(stored.get("note").is_none());
        let mut back = stored;
        rename(&mut back, false);
        assert_eq!(back, sent);
    }
}
