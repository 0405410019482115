"""`simrun compare`: runs matched and compared, separate runs of one study joined, and the comparison report."""
