"""serve's relay: the owner's side of run folders sent over the network (node/sending.py), for
launchers whose clones' machines share no folder with the owner's (`RelayingLauncher`)."""
