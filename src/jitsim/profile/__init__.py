"""``jitsim profile``: run a workload under real TF with auto-clustering off and on, and show
the clusters running (traces, step times, XLA's HLO) next to jitsim's prediction.

One job per module: :mod:`.runner` (the two TF runs), :mod:`.trace` (profiler output to
Chrome trace JSON, and what the events say), :mod:`.timeline` (a trace drawn as SVG),
:mod:`.hlo` (XLA's HLO dumps: collect, count fusions, render), :mod:`.link` (clusters ↔
HLO modules ↔ trace events ↔ prediction: ``summary.json``), :mod:`.page` (``index.html``)
and :mod:`.command` (the whole command, writing its directory atomically).
"""
