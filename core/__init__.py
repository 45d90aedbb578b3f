"""What the API (service/) and the workers (worker/) share: settings, schemas, storage, queueing, job
lifecycle, scoring, the kernel cache and process helpers. It imports neither of them."""
