"""Op-level conformance of the installed vLLM's DCP ops vs a float64 reference. Imports: nothing else in harness."""

# reference, tolerance and cases need only numpy, pydantic and yaml (they run in the harness environment too);
# torch and vllm are imported only by vllm_ops, worker and runner, which run in the server environment.
