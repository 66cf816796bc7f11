"""The hint a failed download gets names what works for every command: the variable."""

from pytest_reactbench.sandbox.tls import tls_hint


def test_the_hints_name_the_variables_every_command_reads() -> None:
    tls = tls_hint("npm error code UNABLE_TO_GET_ISSUER_CERT_LOCALLY")
    assert "REACTBENCH_CA_BUNDLE=PATH" in tls and "--reactbench-ca-bundle" in tls
    unsigned = tls_hint("Error: No compatible signature found in package metadata")
    assert "REACTBENCH_UNSIGNED_REGISTRY=1" in unsigned and "reactbench mine" in unsigned
    assert tls_hint("npm error 404 Not Found") == ""
