//! Impersonation (`kubectl --as`, `--as-group`, `--as-uid`): honoured by every endpoint,
//! authorized by the `impersonate` verb on each part, recorded in the audit log.

use std::time::Duration;

use super::common::management::{Management, kubeconfig_of, text};
use super::{kubectl_as, refused_with, user_with_cluster_rules};

#[test]
fn kubectl_as_runs_as_the_impersonated_user() {
    let m = Management::up_with_audit_policy(
        "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n",
    );
    // The administrator may impersonate anyone, and then has only their rights.
    let whoami = m.kubectl(&[
        "auth",
        "whoami",
        "--as=alice",
        "--as-group=developers",
        "-o",
        "json",
    ]);
    let who: serde_json::Value = serde_json::from_str(&whoami).unwrap();
    assert_eq!(who["status"]["userInfo"]["username"], "alice");
    assert_eq!(
        who["status"]["userInfo"]["groups"],
        serde_json::json!(["developers", "system:authenticated"])
    );
    let can = |args: &[&str]| {
        text(
            &m.kubectl_output(&[&["auth", "can-i"], args].concat(), None)
                .stdout,
        )
        .trim()
        .to_string()
    };
    // As on kube-apiserver, the anonymous user may not even ask.
    let anonymous = m.kubectl_output(
        &[
            "auth",
            "can-i",
            "--as=system:anonymous",
            "list",
            "secrets",
            "-n",
            "kube-system",
        ],
        None,
    );
    refused_with(
        &anonymous,
        "User \"system:anonymous\" cannot create resource \"selfsubjectaccessreviews\"",
    );
    assert_ne!(text(&anonymous.stdout).trim(), "yes");
    assert_eq!(
        can(&["--as=alice", "list", "secrets", "-n", "kube-system"]),
        "no"
    );
    assert_eq!(can(&["list", "secrets", "-n", "kube-system"]), "yes");
    let secrets = m.kubectl_output(&["--as=alice", "-n", "kube-system", "get", "secrets"], None);
    refused_with(&secrets, "User \"alice\" cannot list resource \"secrets\"");
    // A ServiceAccount gets its own groups.
    let robot = m.kubectl(&[
        "auth",
        "whoami",
        "--as=system:serviceaccount:default:robot",
        "-o",
        "jsonpath={.status.userInfo.groups}",
    ]);
    assert!(robot.contains("system:serviceaccounts:default"), "{robot}");

    // Someone without `impersonate` cannot.
    let mallory = kubeconfig_of(&m, "mallory", &[]);
    let out = kubectl_as(&m, &mallory, &["--as=alice", "get", "namespaces"]);
    refused_with(
        &out,
        "users \"alice\" is forbidden: User \"mallory\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope",
    );
    let out = kubectl_as(
        &m,
        &mallory,
        &[
            "--as=mallory",
            "--as-group=system:masters",
            "get",
            "secrets",
            "-A",
        ],
    );
    refused_with(&out, "cannot impersonate resource");

    // Allowed to impersonate alice only, and not her groups' admin rights.
    let grace = user_with_cluster_rules(
        &m,
        "grace",
        r#"[{apiGroups: [""], resources: [users], verbs: [impersonate], resourceNames: [alice]}]"#,
    );
    let as_alice = kubectl_as(&m, &grace, &["auth", "whoami", "--as=alice"]);
    assert!(as_alice.status.success(), "{}", text(&as_alice.stderr));
    assert!(text(&as_alice.stdout).contains("alice"));
    let as_bob = kubectl_as(&m, &grace, &["get", "namespaces", "--as=bob"]);
    refused_with(&as_bob, "cannot impersonate resource \"users\"");
    let as_masters = kubectl_as(
        &m,
        &grace,
        &[
            "get",
            "secrets",
            "-A",
            "--as=alice",
            "--as-group=system:masters",
        ],
    );
    refused_with(&as_masters, "groups \"system:masters\" is forbidden");

    // The audit log names both the caller and whom they impersonated.
    let log = std::path::Path::new(&m.state()).join("audit.log");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let event = loop {
        let raw = std::fs::read_to_string(&log).unwrap_or_default();
        let found = raw
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .find(|e| {
                e["user"]["username"] == "grace" && e["impersonatedUser"]["username"] == "alice"
            });
        if let Some(e) = found {
            break e;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no impersonated request in the audit log:\n{raw}"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(
        event["impersonatedUser"]["groups"],
        serde_json::json!(["system:authenticated"])
    );
}
