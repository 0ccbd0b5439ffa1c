"""What the MultiWorkerMirroredStrategy worker scripts of these tests share.

Each worker runs in its own process with ``TF_CONFIG`` set by
``tests/test_distribute_tf.py``; this directory is on ``sys.path`` (it holds
the script being run).
"""

import json
import os

import tensorflow as tf


def cluster_role():
    """`(task index, number of workers)` of this process, from TF_CONFIG."""
    tf_config = json.loads(os.environ["TF_CONFIG"])
    return tf_config["task"]["index"], len(tf_config["cluster"]["worker"])


def ring_strategy(workers):
    """A MultiWorkerMirroredStrategy on RING collectives over `workers` workers."""
    strategy = tf.distribute.MultiWorkerMirroredStrategy(
        communication_options=tf.distribute.experimental.CommunicationOptions(
            implementation=tf.distribute.experimental.CommunicationImplementation.RING
        )
    )
    assert strategy.num_replicas_in_sync == workers, strategy.num_replicas_in_sync
    return strategy


def sharded_by_data(dataset):
    """`dataset` split between the workers by element (each sees its own rows)."""
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    return dataset.with_options(options)
