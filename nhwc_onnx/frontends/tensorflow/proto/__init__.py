"""TensorFlow's GraphDef schema subset (see tf_graph.proto); tf_graph_pb2 is generated."""
