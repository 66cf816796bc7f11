import ProfileHeader from "./ProfileHeader";
import SessionTimer from "./SessionTimer";
import TagList from "./TagList";
import { demoUser } from "./types";

export default function App() {
  return (
    <main>
      <ProfileHeader user={demoUser} />
      <TagList tags={demoUser.tags} />
      <SessionTimer />
    </main>
  );
}
