"""Op-level conformance of the installed vLLM's DCP building blocks against a float64 reference.

May import: numpy, pydantic, yaml (reference, tolerance, cases); torch and vllm only in worker/vllm_ops/runner,
which run in the server environment."""
