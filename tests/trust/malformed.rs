//! Nothing malformed is stored: built-in objects are checked against their types before
//! anything is written, so typed clients keep listing every kind, cluster-wide.

use super::common::management::{Management, text};

/// `body` created at `path` as it is (`kubectl create --raw`: kubectl would refuse some itself).
fn create_raw(m: &Management, path: &str, body: &str) -> std::process::Output {
    m.kubectl_output(&["create", "--raw", path, "-f", "-"], Some(body))
}

#[test]
fn malformed_built_in_objects_are_refused_naming_the_field_and_typed_clients_keep_listing() {
    let m = Management::up();
    let deployments = "/apis/apps/v1/namespaces/default/deployments";
    let deployment = |spec: &str| {
        format!(
            r#"{{"apiVersion":"apps/v1","kind":"Deployment","metadata":{{"name":"web"}},"spec":{spec}}}"#
        )
    };
    let good_template = r#""selector":{"matchLabels":{"app":"web"}},"template":{"metadata":{"labels":{"app":"web"}},"spec":{"containers":[{"name":"web","image":"nginx"}]}}"#;
    // (what, path, body, the field and words the refusal names)
    let cases = [
        ("replicas as a word", deployments, deployment(&format!(r#"{{"replicas":"three",{good_template}}}"#)), "spec.replicas in body must be of type integer"),
        ("replicas of 2^40", deployments, deployment(&format!(r#"{{"replicas":1099511627776,{good_template}}}"#)), "spec.replicas in body must be of type int32"),
        ("replicas of 1.5", deployments, deployment(&format!(r#"{{"replicas":1.5,{good_template}}}"#)), "spec.replicas in body must be of type integer"),
        ("a strategy named Bogus", deployments, deployment(&format!(r#"{{"strategy":{{"type":"Bogus"}},{good_template}}}"#)), "spec.strategy.type: Unsupported value: \"Bogus\": supported values: \"Recreate\", \"RollingUpdate\""),
        ("a Service cluster IP that is no IP", "/api/v1/namespaces/default/services", r#"{"apiVersion":"v1","kind":"Service","metadata":{"name":"svc"},"spec":{"clusterIP":"not-an-ip","ports":[{"port":80}]}}"#.to_string(), "spec.clusterIP"),
        ("Role rules as a string", "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles", r#"{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"Role","metadata":{"name":"r"},"rules":"x"}"#.to_string(), "rules in body must be of type array"),
        ("an owner reference kind as a number", "/api/v1/namespaces/default/configmaps", r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"owned","ownerReferences":[{"kind":1}]}}"#.to_string(), "metadata.ownerReferences[0].kind"),
        ("stringData with a number", "/api/v1/namespaces/default/secrets", r#"{"apiVersion":"v1","kind":"Secret","metadata":{"name":"numbers"},"stringData":{"n":42}}"#.to_string(), "stringData[n]"),
    ];
    for (what, path, body, expected) in &cases {
        let out = create_raw(&m, path, body);
        let err = text(&out.stderr);
        assert!(!out.status.success(), "{what} was accepted");
        assert!(
            err.contains("is invalid") && err.contains(expected),
            "{what}: {err}"
        );
    }
    let stored = m.kubectl(&[
        "get",
        "deployments,services,roles,configmaps,secrets",
        "-o",
        "name",
    ]);
    for name in [
        "deployment.apps/web",
        "service/svc",
        "role.rbac.authorization.k8s.io/r",
        "configmap/owned",
        "secret/numbers",
    ] {
        assert!(!stored.contains(name), "{name} was stored: {stored}");
    }
    // A Secret's rejected value is never quoted back (nor, so, written to the audit log).
    let out = create_raw(
        &m,
        "/api/v1/namespaces/default/secrets",
        r#"{"apiVersion":"v1","kind":"Secret","metadata":{"name":"raw"},"data":{"password":"hunter2!"}}"#,
    );
    let err = text(&out.stderr);
    assert!(
        err.contains("data[password]") && !err.contains("hunter2"),
        "{err}"
    );
    let audit = std::path::Path::new(&m.state()).join("audit.log");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !std::fs::read_to_string(&audit)
        .unwrap_or_default()
        .contains("data[password]")
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the refusal is not in the audit log"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(
        !std::fs::read_to_string(&audit).unwrap().contains("hunter2"),
        "a Secret's value reached the audit log"
    );

    // Keys sent twice: refused under Strict, warned about otherwise; unknown fields alike.
    let twice = format!(
        r#"{{"apiVersion":"apps/v1","kind":"Deployment","metadata":{{"name":"twice"}},"spec":{{"replicas":1,"replicas":2,{good_template}}}}}"#
    );
    let strict = create_raw(&m, &format!("{deployments}?fieldValidation=Strict"), &twice);
    assert!(!strict.status.success());
    assert!(
        text(&strict.stderr).contains("strict decoding error: duplicate field \"spec.replicas\""),
        "{}",
        text(&strict.stderr)
    );
    let warned = create_raw(&m, deployments, &twice);
    assert!(warned.status.success(), "{}", text(&warned.stderr));
    assert!(
        text(&warned.stderr).contains("duplicate field \"spec.replicas\""),
        "{}",
        text(&warned.stderr)
    );
    assert_eq!(
        m.kubectl(&[
            "get",
            "deployment",
            "twice",
            "-o",
            "jsonpath={.spec.replicas}"
        ]),
        "2"
    );
    let typo = format!(
        r#"{{"apiVersion":"apps/v1","kind":"Deployment","metadata":{{"name":"typo"}},"spec":{{"replica":1,{good_template}}}}}"#
    );
    let strict = create_raw(&m, &format!("{deployments}?fieldValidation=Strict"), &typo);
    assert!(
        text(&strict.stderr).contains("unknown field \"spec.replica\""),
        "{}",
        text(&strict.stderr)
    );

    // The Python client lists every Deployment and Secret of the cluster.
    let python = std::env::var("PYTHON_KUBERNETES").unwrap_or_else(|_| "python3".into());
    let script = r#"
import sys
from kubernetes import client, config
config.load_kube_config(sys.argv[1])
apps = client.AppsV1Api()
core = client.CoreV1Api()
rbac = client.RbacAuthorizationV1Api()
print(len(apps.list_deployment_for_all_namespaces().items), len(core.list_secret_for_all_namespaces().items) >= 0, len(rbac.list_role_for_all_namespaces().items) >= 0)
"#;
    let out = std::process::Command::new(python)
        .args(["-c", script, m.kubeconfig().to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout).trim(), "1 True True");
}

#[test]
fn server_side_apply_of_what_was_created_does_not_conflict() {
    let m = Management::up();
    let manifest = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  selector:\n    matchLabels: {app: web}\n  template:\n    metadata:\n      labels: {app: web}\n    spec:\n      containers:\n      - name: web\n        image: nginx\n        ports:\n        - containerPort: 80\n";
    m.kubectl_in(
        &["create", "-f", "-", "--field-manager=OpenAPI-Generator"],
        Some(manifest),
    );
    let applied = m.kubectl_output(&["apply", "--server-side", "-f", "-"], Some(manifest));
    assert!(applied.status.success(), "{}", text(&applied.stderr));
    // The applier now co-owns the container by its key, and can change its image alone.
    let changed = manifest.replace("image: nginx", "image: nginx:2");
    m.kubectl_in(
        &["apply", "--server-side", "-f", "-", "--force-conflicts"],
        Some(&changed),
    );
    assert_eq!(
        m.kubectl(&[
            "get",
            "deployment",
            "web",
            "-o",
            "jsonpath={.spec.template.spec.containers[0].image}"
        ]),
        "nginx:2"
    );
    let fields = m.kubectl(&[
        "get",
        "deployment",
        "web",
        "-o",
        "jsonpath={.metadata.managedFields[?(@.manager==\"kubectl\")].fieldsV1}",
    ]);
    assert!(fields.contains("k:{\\\"name\\\":\\\"web\\\"}"), "{fields}");
}
