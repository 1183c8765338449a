//! ExtensionConfig: upstream's extensionconfig controller. It injects the CA of the Secret the
//! `runtime.cluster.x-k8s.io/inject-ca-from-secret` annotation names into
//! `spec.clientConfig.caBundle`, asks the server which handlers it has (Discovery) and records
//! them in `status.handlers` with the `Discovered` condition; [`crate::extensions`] calls the
//! handlers of the ExtensionConfigs discovered at their current generation.

use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use serde_json::json;

use crate::api::runtime::{ExtensionConfig, INJECT_CA_FROM_SECRET_ANNOTATION, conditions, reasons};
use crate::conditions::{NewCondition, Status};
use crate::reconcile::common;
use crate::reconcile::runtime::Wiring;
use crate::reconcile::{Context, Error, Result};

pub const CONTROLLER: &str = "extensionconfig";

/// How often an ExtensionConfig is discovered again, and its injected CA read again: the
/// Secret is not watched (the management cluster's Secrets are many; CAs change rarely).
const REFRESH: Duration = Duration::from_secs(60);

pub fn controller(w: &Wiring) -> BoxFuture<'static, ()> {
    let controller = w.controller::<ExtensionConfig>(CONTROLLER);
    w.run(CONTROLLER, controller, reconcile)
}

pub async fn reconcile(config: Arc<ExtensionConfig>, ctx: Arc<Context>) -> Result<Action> {
    let api: Api<ExtensionConfig> = Api::all(ctx.client.clone());
    let (is_paused, paused) = common::paused(
        ctx.management_uid(),
        None,
        "ExtensionConfig",
        config.annotations(),
    );
    if is_paused {
        return common::record_paused(&api, config.as_ref(), paused).await;
    }
    let not_discovered = |message: String| {
        NewCondition::new(
            conditions::DISCOVERED,
            Status::False,
            reasons::NOT_DISCOVERED,
        )
        .message(message)
    };
    let mut status = config.status.clone().unwrap_or_default();
    let discovered = match injected_ca(&ctx, &config).await {
        // A CA the Secret cannot give is said where the user looks, not only in the logs.
        Err(Error::Invalid(why)) => not_discovered(why),
        Err(e) => return Err(e),
        Ok(Some(bundle))
            if config.spec.client_config.ca_bundle.as_deref() != Some(bundle.as_str()) =>
        {
            let patch = json!({"spec": {"clientConfig": {"caBundle": bundle}}});
            common::patch_merge(&api, &config.name_any(), patch).await?;
            return Ok(Action::await_change());
        }
        Ok(_) => match crate::extensions::discover(&config).await {
            Ok(handlers) => {
                status.handlers = Some(handlers);
                NewCondition::new(conditions::DISCOVERED, Status::True, reasons::DISCOVERED)
            }
            // The handlers found before stay: a server restarting does not unregister them.
            Err(e) => not_discovered(format!("Error in discovery: {e}")),
        },
    };
    let failed = discovered.status == Status::False;
    common::set_conditions(
        &mut status.conditions,
        config.meta().generation,
        vec![paused, discovered],
    );
    common::write_status(&api, &config.name_any(), config.status.as_ref(), &status).await?;
    Ok(Action::requeue(if failed {
        Duration::from_secs(10)
    } else {
        REFRESH
    }))
}

/// The base64 of the `ca.crt` of the Secret the injection annotation names, if it names one.
async fn injected_ca(ctx: &Context, config: &ExtensionConfig) -> Result<Option<String>> {
    let Some(name) = config.annotations().get(INJECT_CA_FROM_SECRET_ANNOTATION) else {
        return Ok(None);
    };
    let Some((namespace, secret)) = name
        .split_once('/')
        .filter(|(n, s)| !n.is_empty() && !s.is_empty())
    else {
        return Err(Error::Invalid(format!(
            "failed to reconcile caBundle: secret name {name:?} must be in the form <namespace>/<name>"
        )));
    };
    let found = Api::<Secret>::namespaced(ctx.client.clone(), namespace)
        .get_opt(secret)
        .await?
        .ok_or_else(|| {
            Error::Invalid(format!(
                "failed to reconcile caBundle: secret {name:?} not found: create it, or correct the {INJECT_CA_FROM_SECRET_ANNOTATION} annotation"
            ))
        })?;
    let ca = found
        .data
        .and_then(|d| d.get("ca.crt").cloned())
        .ok_or_else(|| {
            Error::Invalid(format!(
                "failed to reconcile caBundle: secret {name} does not contain a \"ca.crt\" entry"
            ))
        })?;
    Ok(Some(base64::engine::general_purpose::STANDARD.encode(ca.0)))
}
