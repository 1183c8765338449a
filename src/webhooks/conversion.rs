//! Cluster API's v1beta1 ↔ v1beta2 conversion ([`crate::api::conversion`]) as the API server's
//! converter: in process on the embedded management cluster, and over HTTPS as the providers'
//! conversion webhook on a real one.

use std::sync::{Arc, Weak};

use serde_json::Value;

use crate::api::conversion;
use crate::apiserver::ApiServer;
use crate::apiserver::conversion::{Converter, Converters};

/// Converts Cluster API's kinds. A v1beta2 reference names only its object's group; its
/// v1beta1 form names a version too: the one this management cluster stores that kind in,
/// read from the server when there is one, else the contract's.
#[derive(Debug, Default, Clone)]
pub struct ClusterApiConverter {
    server: Option<Weak<ApiServer>>,
}

impl ClusterApiConverter {
    fn api_version(&self, group: &str, kind: &str) -> String {
        let stored = self
            .server
            .as_ref()
            .and_then(Weak::upgrade)
            .and_then(|server| server.registry.storage_version(group, kind));
        let version = stored.unwrap_or_else(|| crate::api::CONTRACT_VERSION.to_string());
        if group.is_empty() {
            version
        } else {
            format!("{group}/{version}")
        }
    }
}

impl Converter for ClusterApiConverter {
    fn converts(&self, kind: &str) -> bool {
        conversion::kinds().iter().any(|(_, k)| *k == kind)
    }

    fn convert(&self, object: Value, to_version: &str) -> Result<Value, String> {
        conversion::convert(object, to_version, &|group, kind| {
            self.api_version(group, kind)
        })
        .map_err(|e| e.to_string())
    }
}

/// The Cluster API groups, each with the converter.
pub fn converters(converter: ClusterApiConverter) -> Converters {
    let converter: Arc<dyn Converter> = Arc::new(converter);
    let mut groups: Vec<&str> = conversion::kinds().into_iter().map(|(g, _)| g).collect();
    groups.sort();
    groups.dedup();
    groups
        .into_iter()
        .map(|group| (group.to_string(), converter.clone()))
        .collect()
}

/// Registers the conversion with an embedded management cluster's API server.
pub fn register(server: &Arc<ApiServer>) {
    let converter = ClusterApiConverter {
        server: Some(Arc::downgrade(server)),
    };
    for (group, converter) in converters(converter) {
        server.registry.register_converter(&group, converter);
    }
}
