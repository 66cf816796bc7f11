#!/bin/bash
# Grades /app in the clean room of the verifier image; writes /logs/verifier/reward.json.
exec node /opt/reactbench/verifier/verifier.mjs grade
