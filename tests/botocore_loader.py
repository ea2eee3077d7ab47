"""Test-process speed-up for boto3 (see :func:`share_botocore_data_loader`); conftest applies it
to the pytest process and ``spark_daemon`` to the Python workers of the suite's Spark sessions."""


def share_botocore_data_loader() -> None:
    """One botocore data loader for every boto3 session of the test process.

    Each S3 fetcher makes a boto3 Session of its own, and each new Session parses botocore's
    JSON service models again (~0.1 s of json.loads per client): tests that run a TaskReader per
    planned task spent most of their time there.  The loader only finds and parses those data
    files (its results are cached per loader by botocore itself); credentials, endpoints and
    clients stay per session.  boto3 appends its own data path to the loader of each Session,
    so the shared loader keeps each path once."""
    try:
        import botocore.loaders
        import botocore.session
    except ImportError:
        return

    class _Paths(list):
        def append(self, path):
            if path not in self:
                super().append(path)

    loaders: dict = {}
    create = botocore.loaders.create_loader

    def create_loader(search_path_string=None):
        if search_path_string not in loaders:
            loader = create(search_path_string)
            loader._search_paths = _Paths(loader._search_paths)
            loaders[search_path_string] = loader
        return loaders[search_path_string]

    botocore.session.create_loader = create_loader
