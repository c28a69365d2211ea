"""Front ends for what users hold: TF dumps, SavedModels, ``.keras`` files, GraphDefs exported
from Python, programs and live TensorFlow objects, turned into the graph TF's clustering passes
see. ``resolve`` picks the route and says how exact it is; ``capture`` gets TF's own pass input
with one TF run that compiles nothing; ``prepare`` simulates TF's rewrites before clustering
without TensorFlow."""
