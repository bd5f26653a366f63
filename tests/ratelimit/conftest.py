"""Fixtures of the rate-limit and session-storage tests: a private redis-server, and the vMCP fixtures."""

from tests.operator.conftest import kube, operator
from tests.redis_server import redis_server
from tests.vmcp.conftest import gateway, served
from tests.vmcp.test_auth import issuer

__all__ = ["gateway", "issuer", "kube", "operator", "redis_server", "served"]
