"""The Python daemon of the suite's Spark sessions (``spark.python.daemon.module``): pyspark's
own ``pyspark.daemon``, with botocore's data loader shared by the boto3 sessions of each
worker (tests/botocore_loader.py), so a task's S3 fetcher does not parse botocore's JSON
models again in a reused worker.  Nothing else differs from pyspark's daemon."""
from botocore_loader import share_botocore_data_loader

share_botocore_data_loader()

if __name__ == "__main__":
    from pyspark.daemon import manager
    manager()
