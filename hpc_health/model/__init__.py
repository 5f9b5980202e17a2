"""The model of a run and its figures: the figure declarations, ReFrame's run
report read into measurements, a stored run, a run set, the references a
figure is judged against, and what the judgement reads from the index.
Below both the judgement (judge/) and the store (store/), which import it;
it imports neither, no ReFrame, and renders no text."""
