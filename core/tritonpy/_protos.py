"""The descriptor pool of tritonpy's protobuf messages.

Our messages live in a private pool, not protobuf's default one: tritonclient's
gRPC module registers the same ``inference.*`` names in the default pool, and
both must work in one process (embedding, tests). ``scripts/gen_protos.sh``
points the generated modules here.
"""

from google.protobuf import descriptor_pool

POOL = descriptor_pool.DescriptorPool()
